import type { RequestHandler } from "express";
import type { z } from "zod";
import { requireRole } from "../http/auth.js";
import type { Role } from "../../runtime/tokens-file.js";
import type { BodyPolicy } from "../http/limits.js";
import type { JsonSchema, PARAMETERS, SCHEMAS } from "./schemas.js";

/*
 * What an operation of the API is: each route file declares its own beside its handlers
 * (method, path, access, parameters, body, answers), its role check reads that declaration,
 * and operations.ts lists them all for the document (document.ts) and the contract test.
 */

/**
 * Who may call an operation:
 * - `public`: no token (health checks, metrics, this document);
 * - `bearer`: a bearer token of one of `roles`; `actsAs`: an agent only as itself (the
 *   agent id in the path or body), admin for any;
 * - `webhook`: a bearer token of one of `roles` (the inspector's) and the HMAC signature headers;
 * - `ironic`: no bridge token: the caller's own Ironic credentials pass through;
 * - `page`: the status page's routes, for a browser: no bearer token, but the page's
 *   session cookie, which `session` says the route needs (`none`), answers differently
 *   without (`optional`: a redirect to the login), or refuses without (`required`: 401).
 */
export type Access =
  | { kind: "public" }
  | { kind: "bearer"; roles: readonly Role[]; actsAs?: boolean }
  | { kind: "webhook"; roles: readonly Role[] }
  | { kind: "ironic" }
  | { kind: "page"; session: "none" | "optional" | "required" };

/** A body of one media type and its schema. */
export interface Media {
  type: string;
  schema: JsonSchema;
}

/** What any answer may say besides its description. */
interface Answer {
  description: string;
  /** bodies of media types other than the JSON of `schema` or `codes` (a page, a script, an event stream) */
  content?: readonly Media[];
  /** headers the answer sends besides those every answer of its kind does (a redirect's Location): header objects or $refs */
  headers?: Record<string, JsonSchema>;
}

/**
 * A success answer (a status below 400, or `default`): a component schema as JSON, and/or
 * `content` of other types; neither: no body (204, a redirect), or any (Ironic's, passed on).
 */
export interface Success extends Answer {
  schema?: keyof typeof SCHEMAS;
}

/**
 * A refusal (a status from 400): in the API-SIG shape with the `shardbridge.` codes it may
 * carry (`codes`), a body of another JSON shape (`schema`: readyz's), Ironic's own error
 * passed on by the fenced endpoint (`ironic`), or a body of another type (`content`: the
 * login form again, as HTML) — one or several of these, as the operation answers them.
 * The builder adds the refusals every operation of a kind shares (401, 403, 400, 413,
 * 415, 500, 503): list here only what is the operation's own.
 */
export interface RefusalAnswer extends Answer {
  codes?: readonly string[];
  schema?: keyof typeof SCHEMAS;
  ironic?: true;
}

export interface Operation {
  method: "get" | "put" | "post" | "delete" | "patch" | "head" | "options";
  /** a path template: `{name}` for each parameter, as in `parameters` */
  path: string;
  id: string;
  tag: string;
  summary: string;
  description?: string;
  access: Access;
  parameters?: ReadonlyArray<keyof typeof PARAMETERS>;
  /** query parameters: the zod schema the route parses `req.query` with, and a word on each */
  query?: { schema: z.ZodObject; describe: Record<string, string> };
  /** the request body's component schema; `any`: forwarded as it is (the fenced endpoint) */
  body?: keyof typeof SCHEMAS | "any";
  /**
   * a form body (application/x-www-form-urlencoded, as a browser posts it) and its
   * component schema; what the form's fields break is the operation's own refusal
   */
  form?: keyof typeof SCHEMAS;
  answers: Record<number, Success | RefusalAnswer> & { default?: Success };
  /** false: the operation never touches the store, so never answers 503 store.unavailable */
  store?: false;
  /** how its body is read: the most bytes taken (413 past them), and where it is parsed (default SMALL_BODY) */
  bodyPolicy?: BodyPolicy;
}

/** Every role a bearer token can have. */
export const ALL_ROLES: readonly Role[] = ["admin", "agent", "inspector", "viewer"];
export const READ: Access = { kind: "bearer", roles: ALL_ROLES };
export const AS_AGENT: Access = { kind: "bearer", roles: ["agent", "admin"], actsAs: true };
export const ADMIN: Access = { kind: "bearer", roles: ["admin"] };
export const LEASE_HOLDER: Access = { kind: "bearer", roles: ["agent", "admin"] };
export const NO_NODE: RefusalAnswer = { description: "no such node", codes: ["node.not_found"] };

/**
 * The roles `operation` takes, as it declares them: what its route checks (requireRole,
 * assertRole), so the document and the check cannot part. Throws for an operation without
 * a token. Routes read it once, when built or loaded: a route that checks roles it does not
 * declare fails then, in every test, not at its first request.
 */
export function declaredRoles(operation: Operation): readonly Role[] {
  const { access } = operation;
  if (access.kind !== "bearer" && access.kind !== "webhook")
    throw new Error(`no operation ${operation.id} that takes a bearer token`);
  return access.roles;
}

/** An express route's role check (requireRole) for `operation`, by its declared roles. */
export const roleCheck = (operation: Operation): RequestHandler => requireRole(...declaredRoles(operation));
