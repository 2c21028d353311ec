import { createHash, randomBytes } from "node:crypto";
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

  constructor(file: TokensFile) {
    this.byDigest = new Map(
      file.tokens.map(({ token, ...principal }) => [digest(token), principal as Principal]),
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

/**
 * Who sent `authorization` (the header's value): a known bearer token's principal, or a
 * 401 naming what is wrong, with the WWW-Authenticate header to answer it with.
 */
export function principalFrom(authority: TokenAuthority, authorization: string | undefined): Principal {
  const match = authorization === undefined ? null : /^Bearer (\S+)$/i.exec(authorization);
  if (match === null)
    throw unauthenticated("send Authorization: Bearer <token>", 'Bearer realm="shardbridge"');
  const principal = authority.identify(match[1]!);
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
  if (principal.role === "inspector") throw forbidden("the inspector role cannot act as an agent");
}

/**
 * An agent asks about, reads or moves only a lease it holds itself: 403 when `current`,
 * the shard's live lease, is another agent's. Admin may look at any.
 */
export function assertOwnLease(
  principal: Principal,
  shard: string,
  current: { holder: string } | null,
): void {
  if (principal.role === "agent" && current !== null && current.holder !== principal.agent)
    throw forbidden(`shard ${shard} is held by ${current.holder}, not ${principal.agent}`);
}

/** Whether the caller may see fencing tokens of leases it does not hold: operators only. */
export function seesTokens(principal: Principal): boolean {
  return principal.role === "admin";
}
