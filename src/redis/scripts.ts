import { readdirSync, readFileSync } from "node:fs";
import { Cluster } from "ioredis";
import type { RedisClient } from "./connect.js";
import { assembleScript, parseScriptFile, type ScriptFile } from "./script-files.js";

/** Which clock the scripts judge time by. Only the differential test uses "virtual". */
export type ScriptClock = "server" | "virtual";

/**
 * The scripts, one Lua file each (`<name>.lua` beside this module), whose headers say how
 * many keys each takes and which fragments go before it (script-files.ts). Named here for
 * the type of `runScript`'s name; loading checks the files say the same.
 */
const SCRIPT_NAMES = [
  "acquire",
  "renew",
  "release",
  "fence",
  "read",
  "heartbeat",
  "agents",
  "nodes-upsert",
  "nodes-delete",
  "nodes-list",
  "traits-commit",
  "feed-ack",
  "ironic-read",
  "ironic-settle",
  "ironic-stats",
  "ironic-workers",
  "definitions-write",
] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

/** Every Lua file in this folder, by name, its header read. */
function readScriptFiles(): Map<string, ScriptFile> {
  const folder = new URL("./", import.meta.url);
  const files = new Map<string, ScriptFile>();
  for (const entry of readdirSync(folder)
    .filter((f) => f.endsWith(".lua"))
    .sort()) {
    const name = entry.slice(0, -".lua".length);
    files.set(name, parseScriptFile(name, readFileSync(new URL(entry, folder), "utf8")));
  }
  const scripts = [...files].filter(([, file]) => file.kind === "script").map(([name]) => name);
  const missing = SCRIPT_NAMES.filter((name) => !scripts.includes(name));
  const unnamed = scripts.filter((name) => !(SCRIPT_NAMES as readonly string[]).includes(name));
  if (missing.length > 0 || unnamed.length > 0)
    throw new Error(
      `Lua scripts: no file for ${missing.join(", ") || "-"}; not in SCRIPT_NAMES: ${unnamed.join(", ") || "-"}`,
    );
  return files;
}

let scriptFiles: Map<string, ScriptFile> | undefined;

/**
 * Every script's text as sent, with the clock the scripts judge time by: a lease script's
 * `#!lua` flags line (Redis 7) makes a replica refuse it before it runs, which the
 * caller's kept lineage relies on (store_lineage in clock-server.lua).
 */
export function scriptTexts(clock: ScriptClock): Map<ScriptName, { keys: number | "caller"; lua: string }> {
  scriptFiles ??= readScriptFiles();
  const files = scriptFiles;
  const fragment = (name: string): string => {
    const file = files.get(name === "clock" ? `clock-${clock}` : name);
    if (file?.kind !== "fragment") throw new Error(`Lua scripts: no fragment ${name}.lua`);
    return file.body;
  };
  const texts = new Map<ScriptName, { keys: number | "caller"; lua: string }>();
  for (const name of SCRIPT_NAMES) {
    const file = files.get(name) as Extract<ScriptFile, { kind: "script" }>;
    texts.set(name, { keys: file.keys, lua: assembleScript(file, fragment) });
  }
  return texts;
}

/**
 * Register every script on a client with ioredis `defineCommand`: each is sent once by
 * EVALSHA and re-sent in full when Redis answers NOSCRIPT (after a restart or a
 * SCRIPT FLUSH), so callers never see that error.
 */
export function defineScripts(redis: RedisClient, clock: ScriptClock): void {
  for (const [name, { keys, lua }] of scriptTexts(clock)) {
    redis.defineCommand(`sb_${name}`, { ...(keys !== "caller" && { numberOfKeys: keys }), lua });
  }
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
