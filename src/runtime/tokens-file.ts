/**
 * The tokens file: which bearer token acts as which role (and an agent's token as which
 * agent). Read by `serve` at start; made fresh (devTokens) for a development bridge by
 * `serve` without one and by the chaos runner. The HTTP layer (api/http/auth.ts) checks
 * each request's bearer token against it.
 */
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { z } from "zod";
import { AgentId, noCaseTwins } from "../core/names.js";
import { uniqueField } from "../core/validation.js";
import { parseJsonConfig, readJsonConfig } from "./config.js";
import { logger } from "./log.js";

export type Role = "admin" | "inspector" | "agent" | "viewer";

/**
 * What a bearer token may hold: RFC 6750's b64token, the charset of `Authorization: Bearer
 * <token>` — letters, digits, `-._~+/`, then `=` padding. A token with an inner space is cut
 * at the space by every parser of the header, and one with a non-ASCII letter cannot be
 * sent at all (fetch and curl refuse or mangle it), yet the status page's form would take
 * either: such a token is refused where it is configured, never loaded to fail later.
 */
export const BEARER_TOKEN_PATTERN = /^[A-Za-z0-9._~+/-]+=*$/;

/** What a token that is no b64token holds, told by kind: a refusal names no secret's characters. */
export function bearerTokenProblem(token: string): string | null {
  if (BEARER_TOKEN_PATTERN.test(token)) return null;
  const holds = /\s/.test(token)
    ? "white space"
    : /[^\x21-\x7e]/.test(token)
      ? "a character outside printable ASCII"
      : /=[^=]/.test(token)
        ? "= before its end"
        : "punctuation other than - . _ ~ + /";
  return (
    `must hold only A-Z a-z 0-9 - . _ ~ + / (then = at the end: RFC 6750's bearer token), not ${holds}: ` +
    "it is sent as Authorization: Bearer <token>"
  );
}

/**
 * A bearer token as a tokens file lists it. One that begins or ends with white space (a
 * newline left by `echo`, a pasted space) could never be presented — HTTP trims header
 * values — so it is refused at start rather than loaded to fail every request; so is one
 * that is no b64token (BEARER_TOKEN_PATTERN).
 */
const Secret = z
  .string()
  .min(16, { error: "must be at least 16 characters" })
  .refine((token) => token === token.trim(), {
    error: "must not begin or end with a space or a newline: it could never be presented",
  })
  // Said once: white space at an end is the refusal above.
  .refine((token) => token !== token.trim() || bearerTokenProblem(token) === null, {
    error: (issue) => bearerTokenProblem(issue.input as string) ?? "",
  });

const TokenEntry = z.discriminatedUnion("role", [
  z.strictObject({
    role: z.literal("admin"),
    token: Secret,
  }),
  z.strictObject({
    role: z.literal("inspector"),
    token: Secret,
  }),
  z.strictObject({
    role: z.literal("agent"),
    agent: AgentId,
    token: Secret,
  }),
  z.strictObject({
    role: z.literal("viewer"),
    token: Secret,
  }),
]);
export const TokensFile = z.strictObject({
  tokens: z
    .array(TokenEntry)
    .min(1, { error: "must hold at least one token" })
    // One secret, one principal: a token listed twice would silently take the last role.
    .check(uniqueField("tokens", "token", (entry: { token: string }) => entry.token))
    // One agent may hold several tokens (a rotation), but not under two spellings nova merges.
    .check(noCaseTwins("tokens", "agent", (entry: { role: string; agent?: string }) => entry.agent ?? null)),
});
export type TokensFile = z.output<typeof TokensFile>;

/** Parse a tokens document; errors name `source` (a file, or an environment variable). */
export function parseTokens(text: string, source: string): TokensFile {
  return parseJsonConfig(text, TokensFile, source);
}

export function readTokensFile(path: string): TokensFile {
  const tokens = readJsonConfig(path, TokensFile, `tokens file ${path}`);
  // Said, not refused: some deployments mount the file from a secret store with its own
  // modes. Every local user who can read it can act as every role in it.
  if ((statSync(path).mode & 0o004) !== 0)
    logger.warn("tokens-file-readable-by-all", {
      file: path,
      hint: `every user of this machine can read the bridge's tokens: chmod 600 ${path}`,
    });
  return tokens;
}

/** Fresh random tokens for a development bridge: an admin, an inspector, a viewer and agents. */
export function devTokens(agents: string[]): TokensFile {
  // Hex, not base64url: a token that starts with "-" reads as an option on a command line
  // (`--token -x…` is refused by the CLI's parser), which failed one run in ~20.
  const secret = () => randomBytes(24).toString("hex");
  return {
    tokens: [
      { role: "admin", token: secret() },
      { role: "inspector", token: secret() },
      { role: "viewer", token: secret() },
      ...agents.map((agent) => ({ role: "agent" as const, agent, token: secret() })),
    ],
  };
}
