import { readFileSync } from "node:fs";
import type { RedisClient } from "./connect.js";

/** Which clock the scripts judge time by. Only the differential test uses "virtual". */
export type ScriptClock = "server" | "virtual";

/** One Lua file per atomic operation; the lease ones share a common prelude. */
const LEASE_SCRIPTS = ["acquire", "renew", "release", "fence", "read"] as const;
const AGENT_SCRIPTS = ["heartbeat", "agents"] as const;
const NODE_SCRIPTS = ["nodes-upsert", "nodes-delete", "nodes-list"] as const;
const TRAIT_SCRIPTS = ["traits-commit", "feed-ack"] as const;
export type ScriptName =
  | (typeof LEASE_SCRIPTS)[number]
  | (typeof AGENT_SCRIPTS)[number]
  | (typeof NODE_SCRIPTS)[number]
  | (typeof TRAIT_SCRIPTS)[number]
  | "definitions-write";

function lua(name: string): string {
  return readFileSync(new URL(`./${name}.lua`, import.meta.url), "utf8");
}

/**
 * Register every script on a client with ioredis `defineCommand`: each is sent once by
 * EVALSHA and re-sent in full when Redis answers NOSCRIPT (after a restart or a
 * SCRIPT FLUSH), so callers never see that error.
 */
export function defineScripts(redis: RedisClient, clock: ScriptClock): void {
  // Every script starts with the clock and number helpers; lease scripts add their rules.
  const prelude = `${lua(clock === "server" ? "clock-server" : "clock-virtual")}\n${lua("numbers")}`;
  const leaseRules = lua("lease-common");
  for (const name of LEASE_SCRIPTS) {
    redis.defineCommand(`sb_${name}`, { numberOfKeys: 1, lua: `${prelude}\n${leaseRules}\n${lua(name)}` });
  }
  // Agent scripts: the last-seen sorted set and the served-shards hash.
  for (const name of AGENT_SCRIPTS) {
    redis.defineCommand(`sb_${name}`, { numberOfKeys: 2, lua: `${prelude}\n${lua(name)}` });
  }
  // Node scripts need no clock; they share the registry's key layout (nodes-common.lua)
  // and declare the counts and pool-version keys, which route them to the {nodes} slot.
  const nodeLayout = lua("nodes-common");
  for (const name of NODE_SCRIPTS) {
    redis.defineCommand(`sb_${name}`, { numberOfKeys: 2, lua: `${nodeLayout}\n${lua(name)}` });
  }
  redis.defineCommand("sb_traits-commit", { numberOfKeys: 3, lua: lua("traits-commit") });
  redis.defineCommand("sb_feed-ack", { numberOfKeys: 2, lua: lua("feed-ack") });
  redis.defineCommand("sb_definitions-write", { numberOfKeys: 2, lua: lua("definitions-write") });
}

/** Call a script defined by defineScripts; ioredis adds these methods at run time. */
export function runScript(
  redis: RedisClient,
  name: ScriptName,
  key: string | string[],
  args: Array<string | number>,
): Promise<unknown> {
  const command = (redis as unknown as Record<string, (...a: Array<string | number>) => Promise<unknown>>)[
    `sb_${name}`
  ];
  if (command === undefined) throw new Error(`script ${name} is not defined on this client`);
  return command.call(redis, ...(Array.isArray(key) ? key : [key]), ...args);
}

/**
 * Run a script, then WAIT on the same connection (Redis 7 cannot WAIT inside a script):
 * the script's reply, and how many replicas acknowledged every write before it within
 * `timeoutMs`. One round trip: both go out together.
 */
export async function runScriptAcked(
  redis: RedisClient,
  name: ScriptName,
  key: string | string[],
  args: Array<string | number>,
  replicas: number,
  timeoutMs: number,
): Promise<{ reply: unknown; acked: number }> {
  const pipeline = redis.pipeline();
  const command = (pipeline as unknown as Record<string, (...a: Array<string | number>) => unknown>)[
    `sb_${name}`
  ];
  if (command === undefined) throw new Error(`script ${name} is not defined on this client`);
  command.call(pipeline, ...(Array.isArray(key) ? key : [key]), ...args);
  pipeline.wait(replicas, timeoutMs);
  const [[scriptError, reply], [waitError, acked]] = (await pipeline.exec()) as Array<
    [Error | null, unknown]
  > as [[Error | null, unknown], [Error | null, unknown]];
  if (scriptError !== null) throw scriptError;
  if (waitError !== null) throw waitError;
  return { reply, acked: Number(acked) };
}
