import type { RedisOptions } from "ioredis";
import {
  closeClient,
  isReplicated,
  keepConnected,
  parseRedisSpec,
  redisClient,
  RedisSpecError,
  type RedisClient,
  type RedisTopology,
} from "./connect.js";

/** How long one command may take by default (RedisConnectionOptions.commandTimeoutMs). */
const COMMAND_TIMEOUT_MS = 2000;

/** The longest wait between two attempts to reach the store (it was 1 s: up to 1 s of every failover). */
const RECONNECT_MAX_MS = 250;

/** What the connection itself is opened with; the backends' own options extend it. */
export interface RedisConnectionOptions {
  /** how long one command may take before the caller sees an error, default 2000 ms */
  commandTimeoutMs?: number;
  /**
   * On Sentinel and Cluster: how long a lease write waits for a replica to acknowledge it
   * (WAIT) before it is refused as not done, default 250 ms.
   */
  replicaAckMs?: number;
}

/**
 * Connection settings chosen for leases: a command must never run later than its caller
 * believes. So no offline queue (fail fast while disconnected) and no automatic re-send
 * of commands that were in flight when the connection dropped — a renew replayed after a
 * reconnect would extend a lease its holder already gave up.
 */
export function leaseConnectionOptions(commandTimeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(commandTimeoutMs, 1000),
    // Every lease waits on the reconnect once the store is back (after a Sentinel failover
    // the new master's hold of one TTL starts only at the first write that reaches it), so
    // try again at least every RECONNECT_MAX_MS: a refused connect, or one question to a
    // sentinel, costs next to nothing.
    retryStrategy: (attempt: number) => Math.min(50 * attempt, RECONNECT_MAX_MS),
  };
}

/**
 * The one connection a bridge keeps to a Redis store. openStore opens it and hands it to
 * every backend (leases, the Ironic queue's partition leases, nodes, traits, definitions),
 * so no backend builds another; closing the store closes it.
 */
export class RedisConnection {
  /** WAIT after lease and definition writes: on Sentinel and Cluster, not on a single server */
  readonly acks: { replicas: number; timeoutMs: number } | null;
  /** set by close(): the connection is not to be started again */
  private closed = false;

  private constructor(
    readonly client: RedisClient,
    readonly topology: RedisTopology,
    readonly commandTimeoutMs: number,
    replicaAckMs = 250,
  ) {
    this.acks = isReplicated(topology) ? { replicas: 1, timeoutMs: replicaAckMs } : null;
  }

  /**
   * Connect to the store `target` names (redis://, rediss://, redis+sentinel://,
   * redis+cluster://: see connect.ts) and wait until it answers.
   */
  static async open(
    target: string | RedisTopology,
    options: RedisConnectionOptions = {},
  ): Promise<RedisConnection> {
    // A spec is parsed here; a caller that parsed it already (openStore) hands the topology.
    const topology = typeof target === "string" ? parseRedisSpec(target) : target;
    if (topology === null) throw new RedisSpecError(`${String(target)}: not a Redis spec`);
    const commandTimeoutMs = options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS;
    const client = redisClient(topology, leaseConnectionOptions(commandTimeoutMs));
    // ioredis reports reconnect attempts as 'error' events; without a listener Node would
    // print each one. Callers see errors through rejected commands instead.
    client.on("error", () => undefined);
    await client.connect().catch((error: unknown) => {
      closeClient(client);
      throw error;
    });
    const connection = new RedisConnection(client, topology, commandTimeoutMs, options.replicaAckMs);
    keepConnected(client, () => connection.closed);
    return connection;
  }

  close(): void {
    this.closed = true;
    closeClient(this.client);
  }
}
