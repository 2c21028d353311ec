import { readFileSync } from "node:fs";
import { Cluster } from "ioredis";
import type { RedisClient } from "./connect.js";

/** Which clock the scripts judge time by. Only the differential test uses "virtual". */
export type ScriptClock = "server" | "virtual";

/** One Lua file per atomic operation; the lease ones share a common prelude. */
const LEASE_SCRIPTS = ["acquire", "renew", "release", "fence", "read"] as const;
/** The agent registry's scripts, by their number of keys. */
const AGENT_SCRIPTS = { heartbeat: 3, agents: 2 } as const;
const NODE_SCRIPTS = ["nodes-upsert", "nodes-delete", "nodes-list"] as const;
/** The Ironic delivery queue's scripts, by their number of keys (-1: given by the caller). */
const IRONIC_SCRIPTS = {
  "ironic-read": 2,
  "ironic-settle": 4,
  "ironic-stats": -1,
  "ironic-workers": 1,
} as const;
export type ScriptName =
  | (typeof LEASE_SCRIPTS)[number]
  | keyof typeof AGENT_SCRIPTS
  | (typeof NODE_SCRIPTS)[number]
  | "traits-commit"
  | "feed-ack"
  | keyof typeof IRONIC_SCRIPTS
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
    // The flags line (Redis 7): a replica refuses the script before it runs, which the
    // caller's kept lineage relies on (store_lineage in clock-server.lua).
    redis.defineCommand(`sb_${name}`, {
      numberOfKeys: 1,
      lua: `#!lua\n${prelude}\n${leaseRules}\n${lua(name)}`,
    });
  }
  // Agent scripts: the last-seen sorted set and the served-shards hash (a heartbeat: and nova's host keys).
  for (const [name, keys] of Object.entries(AGENT_SCRIPTS)) {
    redis.defineCommand(`sb_${name}`, { numberOfKeys: keys, lua: `${prelude}\n${lua(name)}` });
  }
  // Node scripts need no clock; they share the registry's key layout (nodes-common.lua)
  // and declare the counts and pool-version keys, which route them to the {nodes} slot.
  const nodeLayout = lua("nodes-common");
  for (const name of NODE_SCRIPTS) {
    redis.defineCommand(`sb_${name}`, { numberOfKeys: 2, lua: `${nodeLayout}\n${lua(name)}` });
  }
  // A trait commit queues its changes for Ironic in the same script.
  redis.defineCommand("sb_traits-commit", {
    numberOfKeys: 7,
    lua: `${lua("ironic-enqueue")}\n${lua("traits-commit")}`,
  });
  redis.defineCommand("sb_feed-ack", { numberOfKeys: 2, lua: lua("feed-ack") });
  for (const [name, keys] of Object.entries(IRONIC_SCRIPTS)) {
    redis.defineCommand(`sb_${name}`, { ...(keys >= 0 && { numberOfKeys: keys }), lua: lua(name) });
  }
  redis.defineCommand("sb_definitions-write", { numberOfKeys: 2, lua: lua("definitions-write") });
}

/**
 * Call a script defined by defineScripts; ioredis adds these methods at run time. A
 * script defined without a number of keys takes it as its first argument (see
 * runScriptWithKeys).
 */
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

/** Call a script whose number of keys varies from call to call (ironic-stats: one per partition). */
export function runScriptWithKeys(
  redis: RedisClient,
  name: ScriptName,
  keys: string[],
  args: Array<string | number>,
): Promise<unknown> {
  return runScript(redis, name, [String(keys.length), ...keys], args);
}

/** How often a lease write follows a Cluster's MOVED before it gives up (each after a slot-map refresh). */
const MAX_MOVED_RETRIES = 3;

/**
 * Run a script, then WAIT on the same connection (Redis 7 cannot WAIT inside a script):
 * the script's reply, and how many replicas acknowledged every write before it within
 * `timeoutMs`. One round trip: both go out together.
 *
 * On a Cluster, after a failover the old master answers the script MOVED and the WAIT an
 * error of its own (it is a replica now); ioredis follows a pipeline's MOVED only when
 * every command in it got the same answer, so it handed the MOVED back and never learned
 * the new slot map: every lease write of the shard failed until some other command
 * happened to hit that slot (measured: for good, in a bench doing only lease writes).
 * MOVED means the script did not run, so the write is sent again once the client has
 * read the slot map afresh.
 */
export async function runScriptAcked(
  redis: RedisClient,
  name: ScriptName,
  key: string | string[],
  args: Array<string | number>,
  replicas: number,
  timeoutMs: number,
): Promise<{ reply: unknown; acked: number }> {
  if (!(redis instanceof Cluster)) {
    // One connection, which resends nothing (see leaseConnectionOptions): the two go out
    // together and in order, and the WAIT answers for the script's write. Not as an ioredis
    // pipeline: every pipeline object keeps what it allocated alive across minor GCs, and
    // every renew on a replicated store would make one (docs/ARCHITECTURE.md, One event loop).
    const [reply, acked] = await Promise.all([
      runScript(redis, name, key, args),
      redis.wait(replicas, timeoutMs),
    ]);
    return { reply, acked: Number(acked) };
  }
  // A Cluster routes a keyless WAIT to any node: the pipeline keeps it with the script's.
  for (let moved = 0; ; moved++) {
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
    if (
      scriptError !== null &&
      redis instanceof Cluster &&
      scriptError.message.startsWith("MOVED ") &&
      moved < MAX_MOVED_RETRIES
    ) {
      await new Promise<void>((resolve) => redis.refreshSlotsCache(() => resolve()));
      continue;
    }
    if (scriptError !== null) throw scriptError;
    if (waitError !== null) throw waitError;
    return { reply, acked: Number(acked) };
  }
}

/**
 * WAIT for `replicas` to acknowledge every write this connection made to the node that
 * holds `key`: how many did within `timeoutMs`. The key routes it on a Cluster (a keyless
 * WAIT would go to any node); on a failover in between, none.
 */
export async function waitForReplicas(
  redis: RedisClient,
  key: string,
  replicas: number,
  timeoutMs: number,
): Promise<number> {
  const [, [waitError, acked]] = (await redis.pipeline().exists(key).wait(replicas, timeoutMs).exec()) as [
    [Error | null, unknown],
    [Error | null, unknown],
  ];
  return waitError === null ? Number(acked) : 0;
}
