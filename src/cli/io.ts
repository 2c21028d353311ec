import type { z } from "zod";
import { bearerTokenProblem, readTokensFile } from "../runtime/tokens-file.js";
import { ConfigError } from "../runtime/config.js";
import { ValidationError, parseOrThrow } from "../core/validation.js";

/** Everything on stdin, as text (the commands that read node lists). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** A positive integer flag, or an error naming the flag. */
export function integerFlag(
  name: string,
  value: string | undefined,
  min: number,
  max: number,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ConfigError(`--${name}: must be an integer ${min}..${max}, got ${value}`);
  return n;
}

/**
 * An http:// or https:// URL flag (--bridge, --ironic), or bad usage naming the flag. fetch
 * reaches nothing else, and says only "Invalid URL" of `127.0.0.1:6390`, or "fetch failed"
 * of `ftp://host`, which `run` took for a bridge not up yet and waited on for ever. A URL
 * of another scheme is named by its scheme alone: it may carry a password (amqp://).
 */
export function httpUrlFlag<T extends string | undefined>(flag: string, value: T, env?: string): T {
  if (value === undefined) return value;
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {
    // said below
  }
  if (url !== null && (url.protocol === "http:" || url.protocol === "https:")) return value;
  const hostAndPort = /^[\w.-]+:\d+(\/|$)/.test(value);
  const got = hostAndPort
    ? `${value} (no scheme)`
    : url === null
      ? `${value}, which does not parse as a URL`
      : `a URL of scheme ${url.protocol}`;
  throw new ConfigError(
    `--${flag}${env === undefined ? "" : ` (or ${env})`}: must be an http:// or https:// URL such as ` +
      `${hostAndPort ? `http://${value}` : "http://127.0.0.1:6390"}, got ${got}`,
  );
}

/**
 * A bearer token from --token (or SHARDBRIDGE_TOKEN), held to the rule the bridge's tokens
 * file is: one it could not hold would only ever be refused, and one fetch cannot send (a
 * non-ASCII letter) would read as an unreachable bridge, which `run` waits out for ever.
 */
export function tokenFlag<T extends string | undefined>(token: T): T {
  const problem = token === undefined ? null : bearerTokenProblem(token);
  if (problem !== null) throw new ConfigError(`--token (or SHARDBRIDGE_TOKEN): ${problem}`);
  return token;
}

/** An agent's bearer token: given, or its entry in a tokens file. */
export function agentToken(id: string, token: string | undefined, tokensFile: string | undefined): string {
  if (token !== undefined) return tokenFlag(token);
  if (tokensFile !== undefined) {
    const file = readTokensFile(tokensFile);
    const entry = file.tokens.find((t) => t.role === "agent" && t.agent === id);
    if (entry === undefined) throw new ConfigError(`${tokensFile} holds no token for agent ${id}`);
    return entry.token;
  }
  throw new ConfigError("agent: pass --token, set SHARDBRIDGE_TOKEN, or --tokens-file");
}

/** --bridge of the commands that call one bridge, and its line in their usage. */
export const BRIDGE_FLAG = {
  type: "string",
  default: process.env.SHARDBRIDGE_URL ?? "http://127.0.0.1:6390",
} as const;
export const BRIDGE_USAGE = `             --bridge URL    the bridge (default $SHARDBRIDGE_URL or http://127.0.0.1:6390)\n`;

/** The flags every command that acts as an agent takes: who, which shard, which bridge, which token. */
export const AGENT_FLAGS = {
  id: { type: "string" },
  shard: { type: "string" },
  bridge: BRIDGE_FLAG,
  token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
  "tokens-file": { type: "string" },
  "standby-poll": { type: "string" },
} as const;

/** The usage line of --standby-poll, shared by the commands that take AGENT_FLAGS. */
export const STANDBY_POLL_USAGE = `             --standby-poll MS  a standby's acquire waits at the bridge for the lease (up to 30 s a request) and is
                             granted the moment it is free; a bridge that cannot wait is asked this often at most
                             (jittered to half of it; default 500)
`;

/** How the commands that call Ironic themselves authenticate (serve --ironic, ironic-sync, inspection-watch, migrate). */
export const IRONIC_AUTH_USAGE = `             Ironic's credentials, from the environment: Keystone with the standard OS_* variables (OS_AUTH_URL and
                             OS_APPLICATION_CREDENTIAL_ID + _SECRET, or OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME,
                             OS_USER_DOMAIN_NAME, OS_PROJECT_DOMAIN_NAME): a token got, kept and renewed before it
                             expires, and once more on a 401; or a fixed token in SHARDBRIDGE_IRONIC_TOKEN; or none
`;

/** --standby-poll: 50 ms to 60 s, or undefined for the keeper's default. */
export const standbyPollMs = (value: string | undefined): number | undefined =>
  integerFlag("standby-poll", value, 50, 60_000);

/** Flag values checked with `schema`: a value it refuses is bad usage (exit 2), naming the flag. */
export function flagsOrThrow<S extends z.ZodType>(schema: S, values: unknown): z.output<S> {
  try {
    return parseOrThrow(schema, values);
  } catch (error) {
    if (error instanceof ValidationError) throw new ConfigError(error.message);
    throw error;
  }
}
