import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { readTokensFile, type Role, type TokensFile } from "../../runtime/tokens-file.js";
import { HttpError } from "./errors.js";

/**
 * Who is calling: an operator, the inspector, one compute agent, or a viewer (a wall
 * display, a monitoring check: reads only, never writes).
 */
export type Principal =
  { role: "admin" } | { role: "inspector" } | { role: "agent"; agent: string } | { role: "viewer" };

const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest("base64");

/**
 * Bearer tokens, each bound to a role (and an agent token to one agent id). Tokens are
 * kept only as SHA-256 digests, and a presented token is looked up by its digest: the
 * lookup's timing depends on the digest, which tells an attacker nothing about any
 * token's characters (comparing the token itself byte by byte would), and it costs the
 * same with 2 tokens or 2,000.
 */
export class TokenAuthority {
  private readonly byDigest: Map<string, Principal>;
  /**
   * Tokens that were presented and known, by themselves: an agent sends its token with
   * every renew, and hashing it each time cost 6 % of a renew. Only known tokens get in,
   * so a guess misses here and is looked up by its digest, as every token once was.
   */
  private readonly known = new Map<string, Principal>();

  /** Per token that may open the status page: its session id, principal and signing key. */
  private readonly pageKeys: Map<string, { principal: Principal; key: Buffer }>;

  constructor(file: TokensFile) {
    this.byDigest = new Map(file.tokens.map(({ token, ...principal }) => [digest(token), principal]));
    this.pageKeys = new Map(
      file.tokens
        .filter(({ role }) => PAGE_ROLES.includes(role))
        .map(({ token, ...principal }) => [
          pageSessionId(token),
          { principal, key: derived("page-session-key", token) },
        ]),
    );
  }

  static fromFile(path: string): TokenAuthority {
    return new TokenAuthority(readTokensFile(path));
  }

  identify(presented: string): Principal | null {
    const seen = this.known.get(presented);
    if (seen !== undefined) return seen;
    const principal = this.byDigest.get(digest(presented)) ?? null;
    if (principal !== null) this.known.set(presented, principal);
    return principal;
  }

  /**
   * A session on the status page for `presented`, a viewer's or admin's token, good until
   * `expiresMs`: the value of the cookie the login sets. It holds no token, only the
   * session's expiry signed with a key derived from the token (HMAC-SHA256), so a stolen
   * cookie opens the page and nothing else, and lapses; every bridge with the same tokens
   * file accepts it (no session table to share); and removing the token from the file
   * ends its sessions. 401 for an unknown token, 403 for a role the page is not for.
   */
  openPageSession(presented: string, expiresMs: number): string {
    const principal = this.identify(presented);
    if (principal === null)
      throw unauthenticated("the token is not known", 'Bearer realm="shardbridge", error="invalid_token"');
    assertRole(principal, PAGE_ROLES);
    const id = pageSessionId(presented);
    const expires = String(Math.floor(expiresMs / 1000));
    return `${id}.${expires}.${this.pageMac(id, expires)}`;
  }

  /**
   * Whose page session `cookie` is (`id`: one per token, whichever login made it) and until
   * when, while it lasts at `nowMs`; null for none, a forged or a lapsed one.
   */
  pageSession(
    cookie: string | undefined,
    nowMs: number,
  ): { id: string; principal: Principal; expiresMs: number } | null {
    const [id, expires, mac, ...rest] = (cookie ?? "").split(".");
    if (id === undefined || expires === undefined || mac === undefined || rest.length > 0) return null;
    const known = this.pageKeys.get(id);
    if (known === undefined || !/^\d{1,12}$/.test(expires) || Number(expires) * 1000 <= nowMs) return null;
    const expected = Buffer.from(this.pageMac(id, expires));
    const given = Buffer.from(mac);
    return given.length === expected.length && timingSafeEqual(given, expected)
      ? { id, principal: known.principal, expiresMs: Number(expires) * 1000 }
      : null;
  }

  private pageMac(id: string, expires: string): string {
    const { key } = this.pageKeys.get(id)!;
    return createHmac("sha256", key).update(`${id}.${expires}`).digest("base64url");
  }
}

/** Who may open the status page: it shows what GET /v1/shards and GET /v1/agents show. */
export const PAGE_ROLES: readonly Role[] = ["viewer", "admin"];

/** 32 bytes derived from `token` for one purpose, named by `label`. */
const derived = (label: string, token: string) =>
  createHash("sha256").update(`shardbridge ${label}\0${token}`, "utf8").digest();

/** Names a token's page sessions without telling anything of the token. */
const pageSessionId = (token: string) =>
  derived("page-session-id", token).subarray(0, 12).toString("base64url");

function unauthenticated(detail: string, challenge: string): HttpError {
  return new HttpError(
    [{ status: 401, code: "shardbridge.auth.unauthenticated", title: "Not authenticated", detail }],
    { "www-authenticate": challenge },
  );
}

export function forbidden(detail: string): HttpError {
  return new HttpError([{ status: 403, code: "shardbridge.auth.forbidden", title: "Forbidden", detail }]);
}

/** The caller, as `authenticate` established it. */
export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}

/** The bearer token `authorization` (the header's value) presents, if it presents one. */
const bearerOf = (authorization: string | undefined): string | null =>
  (authorization === undefined ? null : /^Bearer (\S+)$/i.exec(authorization))?.[1] ?? null;

/** Whether `authorization` (the header's value) presents a known bearer token. */
export function knownBearer(authority: TokenAuthority, authorization: string | undefined): boolean {
  const token = bearerOf(authorization);
  return token !== null && authority.identify(token) !== null;
}

/**
 * Who sent `authorization` (the header's value): a known bearer token's principal, or a
 * 401 naming what is wrong, with the WWW-Authenticate header to answer it with.
 */
export function principalFrom(authority: TokenAuthority, authorization: string | undefined): Principal {
  const token = bearerOf(authorization);
  if (token === null)
    throw unauthenticated("send Authorization: Bearer <token>", 'Bearer realm="shardbridge"');
  const principal = authority.identify(token);
  if (principal === null)
    throw unauthenticated(
      "the bearer token is not known",
      'Bearer realm="shardbridge", error="invalid_token"',
    );
  return principal;
}

/** 401 unless the request carries `Authorization: Bearer <known token>`. */
export function authenticate(authority: TokenAuthority): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    res.locals.principal = principalFrom(authority, req.get("authorization"));
    next();
  };
}

/** 403 unless `principal` has one of `roles`. */
export function assertRole(principal: Principal, roles: readonly Role[]): void {
  if (!roles.includes(principal.role))
    throw forbidden(`role ${principal.role} may not do this; it takes ${roles.join(" or ")}`);
}

/** 403 unless the caller has one of `roles`. */
export function requireRole(...roles: Role[]): RequestHandler {
  return (_req, res, next) => {
    assertRole(principalOf(res), roles);
    next();
  };
}

/**
 * An agent acts only as itself; an operator (admin) may act for any agent, for instance
 * to hand back a lease whose holder is gone for good.
 */
export function assertActsAs(principal: Principal, agent: string): void {
  if (principal.role === "agent" && principal.agent !== agent) {
    throw forbidden(`this token belongs to agent ${principal.agent}, not ${agent}`);
  }
  // By name, not by exclusion: a role added later acts for nobody until it is listed here.
  if (principal.role !== "agent" && principal.role !== "admin")
    throw forbidden(`the ${principal.role} role cannot act as an agent`);
}

/**
 * A viewer reads: 403 for anything but GET and HEAD, before the body is read. The routes'
 * own role checks hold too; this keeps a route that forgot one from taking a viewer's write.
 */
export function viewersRead(): RequestHandler {
  return (req, res, next) => {
    assertViewerReads(principalOf(res), req.method, req.path);
    next();
  };
}

/** 403 when a viewer sends anything but GET or HEAD (see viewersRead; the raw routes call it). */
export function assertViewerReads(principal: Principal, method: string, path: string): void {
  if (principal.role === "viewer" && method !== "GET" && method !== "HEAD")
    throw forbidden(`the viewer role reads only; ${method} ${path} writes`);
}

/**
 * Whether `current`, the shard's live lease, is the caller's to ask about, read or move: an
 * agent's own, or any for admin. A caller told apart "another agent's live token" from "no
 * live lease" could search for the token (it follows the lease's start time, which every
 * role sees): the routes give both one answer.
 */
export function ownsLease(principal: Principal, current: { holder: string } | null): boolean {
  return current !== null && (principal.role !== "agent" || current.holder === principal.agent);
}

/** Whether the caller may see fencing tokens of leases it does not hold: operators only. */
export function seesTokens(principal: Principal): boolean {
  return principal.role === "admin";
}
