import { Cluster, Redis, type RedisOptions } from "ioredis";
import { coalesceWrites } from "./coalesce.js";
import { leaveOnSwitch } from "./master-switch.js";

/** A connection to the store: one server (or a Sentinel-managed master), or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** How the store is laid out behind a spec. */
export type RedisTopology =
  | { kind: "single"; url: string }
  | { kind: "sentinel"; sentinels: Array<{ host: string; port: number }>; masterName: string; db: number }
  | { kind: "cluster"; nodes: Array<{ host: string; port: number }> };

/** Every spec shardbridge takes for Redis, as the usage and the errors name them. */
export const REDIS_SPECS =
  "redis://HOST:PORT[/DB], rediss://... (TLS), redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB] " +
  "or redis+cluster://HOST:PORT[,HOST:PORT...]";

/** A spec that does not parse; the message says what is wrong with it. */
export class RedisSpecError extends Error {}

function hostPorts(list: string, spec: string): Array<{ host: string; port: number }> {
  return list.split(",").map((item) => {
    const match = /^([^:,/]+):(\d{1,5})$/.exec(item.trim());
    const port = Number(match?.[2]);
    if (match === null || port < 1 || port > 65535)
      throw new RedisSpecError(`${spec}: "${item}" is not HOST:PORT`);
    return { host: match[1]!, port };
  });
}

/** Parse a store spec into its topology; null when it is no Redis spec at all. */
export function parseRedisSpec(spec: string): RedisTopology | null {
  if (/^rediss?:\/\//.test(spec)) return { kind: "single", url: spec };
  const sentinel = /^redis\+sentinel:\/\/([^/]+)\/([^/]+)(?:\/(\d+))?\/?$/.exec(spec);
  if (sentinel !== null)
    return {
      kind: "sentinel",
      sentinels: hostPorts(sentinel[1]!, spec),
      masterName: decodeURIComponent(sentinel[2]!),
      db: Number(sentinel[3] ?? 0),
    };
  if (spec.startsWith("redis+sentinel://"))
    throw new RedisSpecError(
      `${spec}: a Sentinel spec is redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]`,
    );
  const cluster = /^redis\+cluster:\/\/([^/]+)\/?$/.exec(spec);
  if (cluster !== null) return { kind: "cluster", nodes: hostPorts(cluster[1]!, spec) };
  if (spec.startsWith("redis+cluster://"))
    throw new RedisSpecError(`${spec}: a Cluster spec is redis+cluster://HOST:PORT[,HOST:PORT...]`);
  return null;
}

/** The spec fit for logs: a password in a redis:// URL masked. */
export function describeSpec(spec: string): string {
  if (!/^rediss?:\/\//.test(spec)) return spec;
  try {
    const parsed = new URL(spec);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable URL)";
  }
}

/** How long a sentinel may take to name the master before the next one is asked. */
const SENTINEL_ANSWER_MS = 1000;

/**
 * A client for `topology` with the lease connection options (`base`). Passwords never sit
 * in a Sentinel or Cluster spec (it is logged, and shown by `ps`): the data nodes' from
 * SHARDBRIDGE_REDIS_PASSWORD, the sentinels' from SHARDBRIDGE_SENTINEL_PASSWORD. A
 * Sentinel client leaves its master the moment a sentinel names another (see
 * master-switch.ts). Close it with closeClient.
 */
export function redisClient(topology: RedisTopology, base: RedisOptions): RedisClient {
  const client = clientFor(topology, base);
  coalesceWrites(client);
  if (topology.kind === "sentinel") stopListening.set(client, leaveOnSwitch(client as Redis));
  return client;
}

/** Each Sentinel client's listeners to the sentinels, stopped by closeClient. */
const stopListening = new WeakMap<RedisClient, () => void>();

/** Disconnect a client redisClient made, for good, and what it listens to beside it. */
export function closeClient(client: RedisClient): void {
  stopListening.get(client)?.();
  client.disconnect();
}

function clientFor(topology: RedisTopology, base: RedisOptions): RedisClient {
  const password = process.env.SHARDBRIDGE_REDIS_PASSWORD || undefined;
  switch (topology.kind) {
    case "single":
      return new Redis(topology.url, base);
    case "sentinel":
      return new Redis({
        ...base,
        sentinels: topology.sentinels,
        name: topology.masterName,
        db: topology.db,
        ...(password !== undefined && { password }),
        ...(process.env.SHARDBRIDGE_SENTINEL_PASSWORD && {
          sentinelPassword: process.env.SHARDBRIDGE_SENTINEL_PASSWORD,
        }),
        // No failoverDetector: leaveOnSwitch (master-switch.ts) leaves the old master
        // when a sentinel names another, at once (after a SENTINEL FAILOVER it stays a
        // writable master for seconds, and a lease granted there would be on a server
        // nobody else reads) and without waiting for a frozen one to close.
        role: "master",
        // ioredis sets no timeout on its questions to a sentinel: one that accepts the
        // connection but never answers (a frozen process, a hung host) held the
        // reconnect after a failover for ever, though the other sentinels named the new
        // master. Skip it after a second and ask the next one.
        sentinelCommandTimeout: SENTINEL_ANSWER_MS,
      });
    case "cluster":
      return new Cluster(topology.nodes, {
        lazyConnect: true,
        enableOfflineQueue: false,
        scaleReads: "master",
        // With the ready check (CLUSTER INFO) on, connect() hung in about one attempt in
        // eight here (ioredis 5.11: the client closed and reconnected during the check, and
        // the promise never settled); without it 40 of 40 connected. The slot map is
        // loaded before "ready" either way.
        enableReadyCheck: false,
        clusterRetryStrategy: (attempt: number) => Math.min(100 * attempt, 2000),
        redisOptions: { ...base, lazyConnect: false, ...(password !== undefined && { password }) },
      });
  }
}

/** How soon a client ioredis gave up on is started again (see keepConnected). */
const RESTART_AFTER_END_MS = 250;

/**
 * Start the client again whenever ioredis gives up on it ("end") while `closed()` says it
 * is still wanted. ioredis gives up when a disconnect reaches a reconnect that is still
 * asking a sentinel for the master: the connect fails as "closed", and no retry is
 * scheduled. Its own failover detector did that on +switch-master, and the bridge then
 * answered 503 until restarted (3 times in 4 with one sentinel frozen, whose 1 s silence
 * makes that window wide); leaveOnSwitch leaves a reconnect alone, and this covers any
 * other way there. A Cluster client reconnects by itself.
 */
export function keepConnected(client: RedisClient, closed: () => boolean): void {
  if (client instanceof Cluster) return;
  client.on("end", () => {
    if (closed()) return;
    setTimeout(() => {
      if (!closed()) client.connect().catch(() => undefined);
    }, RESTART_AFTER_END_MS).unref();
  });
}

/** Whether lease writes must reach a replica before they are answered (see LeaseAcks). */
export const isReplicated = (topology: RedisTopology): boolean => topology.kind !== "single";

/**
 * The keys matching `pattern` in every master's keyspace, a page at a time: a Cluster
 * spreads them over its masters and SCAN sees one node's only.
 */
export async function* scanKeys(client: RedisClient, pattern: string): AsyncIterable<string[]> {
  const nodes: Redis[] = client instanceof Cluster ? client.nodes("master") : [client];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      if (keys.length > 0) yield keys;
      cursor = next;
    } while (cursor !== "0");
  }
}
