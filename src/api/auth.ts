import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { z } from "zod";
import { AgentId } from "../domain/names.js";
import { parseJsonConfig, readJsonConfig } from "../config.js";
import { uniqueField } from "../domain/validation.js";
import { HttpError } from "./errors.js";

export type Role = "admin" | "inspector" | "agent";

/** Who is calling: an operator, the inspector, or one compute agent. */
export type Principal = { role: "admin" } | { role: "inspector" } | { role: "agent"; agent: string };

const TokenEntry = z.discriminatedUnion("role", [
  z.strictObject({
    role: z.literal("admin"),
    token: z.string().min(16, { error: "must be at least 16 characters" }),
  }),
  z.strictObject({
    role: z.literal("inspector"),
    token: z.string().min(16, { error: "must be at least 16 characters" }),
  }),
  z.strictObject({
    role: z.literal("agent"),
    agent: AgentId,
    token: z.string().min(16, { error: "must be at least 16 characters" }),
  }),
]);
export const TokensFile = z.strictObject({
  tokens: z
    .array(TokenEntry)
    .min(1, { error: "must hold at least one token" })
    // One secret, one principal: a token listed twice would silently take the last role.
    .superRefine(uniqueField("tokens", "token", (entry) => entry.token)),
});
export type TokensFile = z.output<typeof TokensFile>;

const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest();

/**
 * Bearer tokens, each bound to a role (and an agent token to one agent id). Tokens are
 * kept as SHA-256 digests and every presented token is compared with every known one in
 * constant time, so neither a match nor its position shows in the answer's timing.
 */
export class TokenAuthority {
  private readonly entries: Array<{ digest: Buffer; principal: Principal }>;

  constructor(file: TokensFile) {
    this.entries = file.tokens.map(({ token, ...principal }) => ({
      digest: digest(token),
      principal: principal as Principal,
    }));
  }

  static fromFile(path: string): TokenAuthority {
    return new TokenAuthority(readTokensFile(path));
  }

  identify(presented: string): Principal | null {
    const candidate = digest(presented);
    let found: Principal | null = null;
    for (const entry of this.entries) {
      if (timingSafeEqual(candidate, entry.digest)) found = entry.principal;
    }
    return found;
  }
}

/** Parse a tokens document; errors name `source` (a file, or an environment variable). */
export function parseTokens(text: string, source: string): TokensFile {
  return parseJsonConfig(text, TokensFile, source);
}

export function readTokensFile(path: string): TokensFile {
  return readJsonConfig(path, TokensFile, `tokens file ${path}`);
}

/** Fresh random tokens for a development bridge: an admin, an inspector and agents. */
export function devTokens(agents: string[]): TokensFile {
  // Hex, not base64url: a token that starts with "-" reads as an option on a command line
  // (`--token -x…` is refused by the CLI's parser), which failed one run in ~20.
  const secret = () => randomBytes(24).toString("hex");
  return {
    tokens: [
      { role: "admin", token: secret() },
      { role: "inspector", token: secret() },
      ...agents.map((agent) => ({ role: "agent" as const, agent, token: secret() })),
    ],
  };
}

function unauthenticated(detail: string): HttpError {
  return new HttpError([
    { status: 401, code: "shardbridge.auth.unauthenticated", title: "Not authenticated", detail },
  ]);
}

export function forbidden(detail: string): HttpError {
  return new HttpError([{ status: 403, code: "shardbridge.auth.forbidden", title: "Forbidden", detail }]);
}

/** The caller, as `authenticate` established it. */
export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}

/** 401 unless the request carries `Authorization: Bearer <known token>`. */
export function authenticate(authority: TokenAuthority): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const header = req.get("authorization");
    const match = header === undefined ? null : /^Bearer (\S+)$/i.exec(header);
    if (match === null) {
      res.set("www-authenticate", 'Bearer realm="shardbridge"');
      throw unauthenticated("send Authorization: Bearer <token>");
    }
    const principal = authority.identify(match[1]!);
    if (principal === null) {
      res.set("www-authenticate", 'Bearer realm="shardbridge", error="invalid_token"');
      throw unauthenticated("the bearer token is not known");
    }
    res.locals.principal = principal;
    next();
  };
}

/** 403 unless the caller has one of `roles`. */
export function requireRole(...roles: Role[]): RequestHandler {
  return (_req, res, next) => {
    const principal = principalOf(res);
    if (!roles.includes(principal.role)) {
      throw forbidden(`role ${principal.role} may not do this; it takes ${roles.join(" or ")}`);
    }
    next();
  };
}

/**
 * An agent acts only as itself; an operator (admin) may act for any agent, for instance
 * to hand back a lease whose holder is gone for good.
 */
export function assertActsAs(res: Response, agent: string): void {
  const principal = principalOf(res);
  if (principal.role === "agent" && principal.agent !== agent) {
    throw forbidden(`this token belongs to agent ${principal.agent}, not ${agent}`);
  }
  if (principal.role === "inspector") throw forbidden("the inspector role cannot act as an agent");
}

/**
 * An agent asks about, reads or moves only a lease it holds itself: 403 when `current`,
 * the shard's live lease, is another agent's. Admin may look at any.
 */
export function assertOwnLease(res: Response, shard: string, current: { holder: string } | null): void {
  const principal = principalOf(res);
  if (principal.role === "agent" && current !== null && current.holder !== principal.agent)
    throw forbidden(`shard ${shard} is held by ${current.holder}, not ${principal.agent}`);
}

/** Whether the caller may see fencing tokens of leases it does not hold: operators only. */
export function seesTokens(res: Response): boolean {
  return principalOf(res).role === "admin";
}
