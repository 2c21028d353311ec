import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import calculateSlot from "cluster-key-slot";
import { Cluster, type Redis } from "ioredis";
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
  "definitions-read",
  "definitions-restore",
] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

/** Every Lua file in this folder, by name, its header read. */
function readScriptFiles(): Map<string, ScriptFile> {
  const folder = new URL("./lua/", import.meta.url);
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
 * SCRIPT FLUSH), so callers never see that error. runScriptAcked sends them itself.
 */
export function defineScripts(redis: RedisClient, clock: ScriptClock): void {
  const texts = scriptTexts(clock);
  for (const [name, { keys, lua }] of texts)
    redis.defineCommand(`sb_${name}`, { ...(keys !== "caller" && { numberOfKeys: keys }), lua });
  ackedSources.set(
    redis,
    new Map(
      [...texts].map(([name, { keys, lua }]) => [
        name,
        { keys, lua, sha: createHash("sha1").update(lua).digest("hex") },
      ]),
    ),
  );
}

/** A script as runScriptAcked sends it itself: its text, its SHA1, its number of keys. */
interface ScriptSource {
  keys: number | "caller";
  lua: string;
  sha: string;
}

/** Each client's scripts, as defineScripts gave them, for runScriptAcked. */
const ackedSources = new WeakMap<RedisClient, Map<ScriptName, ScriptSource>>();

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
 * `timeoutMs`. One round trip: both go out together. The script takes a fixed number of
 * keys (`key`, or the first of them, names its Cluster slot).
 *
 * On a Cluster both go on the connection to the master the client's slot map names for
 * the key. After a failover the old master answers the script MOVED: it did not run, so
 * the write is sent again once the client has read the slot map afresh. (An ioredis
 * pipeline would also keep the two together, and follows a MOVED only when every command
 * in it got the same answer, which a WAIT never does; it also makes every defined
 * script's method anew for each pipeline: 39-45 µs of Node a renew against 11-14 µs for
 * the two sent on the node's connection, measured with 3 masters.)
 */
export async function runScriptAcked(
  redis: RedisClient,
  name: ScriptName,
  key: string | string[],
  args: Array<string | number>,
  replicas: number,
  timeoutMs: number,
): Promise<{ reply: unknown; acked: number }> {
  const source = ackedSources.get(redis)?.get(name);
  if (source === undefined) throw new Error(`script ${name} is not defined on this client`);
  const keys = [key].flat();
  // A script of no fixed number of keys takes it first among them (runScriptWithKeys).
  const keysAndArgs: AckedScript["keysAndArgs"] =
    source.keys === "caller" ? [keys[0]!, ...keys.slice(1), ...args] : [source.keys, ...keys, ...args];
  const acked = { source, keysAndArgs, replicas, timeoutMs };
  if (!(redis instanceof Cluster)) return scriptThenWait(redis, acked);
  const slot = calculateSlot(keys[0]!);
  for (let moved = 0; ; moved++) {
    const master = masterOfSlot(redis, slot);
    if (master !== undefined) {
      try {
        return await scriptThenWait(master, acked);
      } catch (error) {
        const wasMoved = error instanceof Error && error.message.startsWith("MOVED ");
        if (!wasMoved || moved >= MAX_MOVED_RETRIES) throw error;
      }
    } else if (moved >= MAX_MOVED_RETRIES) {
      throw new Error(`no master of slot ${slot} in the cluster's slot map`);
    }
    await new Promise<void>((resolve) => redis.refreshSlotsCache(() => resolve()));
  }
}

interface AckedScript {
  source: ScriptSource;
  /** EVALSHA's arguments after the SHA1: the number of keys, the keys, the arguments */
  keysAndArgs: [numberOfKeys: string | number, ...keysThenArgs: Array<string | number>];
  replicas: number;
  timeoutMs: number;
}

/**
 * The script and its WAIT on one connection, which resends nothing (see
 * leaseConnectionOptions): the two go out together and in order, and the WAIT answers for
 * the script's write. Not as an ioredis pipeline: every pipeline object keeps what it
 * allocated alive across minor GCs, and every renew on a replicated store would make one
 * (docs/ARCHITECTURE.md, One event loop).
 *
 * Not as a command defineScripts made either: on NOSCRIPT (a SCRIPT FLUSH, a restart, or
 * on recent Redis, 7.4 or 8.0 by its docs, the eviction of a script first sent by EVAL)
 * ioredis sends the script again after the WAIT that went with it, which then answered
 * for nothing the write did, and a renew no replica had was reported done. Here the
 * script is loaded (SCRIPT LOAD: never evicted) and sent again with a WAIT of its own.
 */
async function scriptThenWait(
  redis: Redis,
  { source, keysAndArgs, replicas, timeoutMs }: AckedScript,
): Promise<{ reply: unknown; acked: number }> {
  let [script, wait] = await Promise.allSettled([
    redis.evalsha(source.sha, ...keysAndArgs),
    redis.wait(replicas, timeoutMs),
  ]);
  if (script.status === "rejected" && (script.reason as Error).message?.startsWith("NOSCRIPT ")) {
    [, script, wait] = await Promise.allSettled([
      redis.script("LOAD", source.lua),
      redis.evalsha(source.sha, ...keysAndArgs),
      redis.wait(replicas, timeoutMs),
    ]);
  }
  // The script's error first: a demoted master answers it MOVED and the WAIT an error of
  // its own, and only the MOVED says where to send it again.
  if (script.status === "rejected") throw script.reason;
  if (wait.status === "rejected") throw wait.reason;
  return { reply: script.value, acked: Number(wait.value) };
}

/** The connection to the master `cluster`'s slot map names for `slot`, if it has one. */
function masterOfSlot(cluster: Cluster, slot: number): Redis | undefined {
  const nodeKey = cluster.slots[slot]?.[0];
  if (nodeKey === undefined) return undefined;
  return cluster.nodes("master").find((node) => `${node.options.host}:${node.options.port}` === nodeKey);
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
