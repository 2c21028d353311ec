import { MemoryTraits } from "./memory/traits.js";
import { MemoryNodes } from "./memory/nodes.js";
import { MemoryLeases } from "./memory/leases.js";
import { RedisLeases, type RedisBackendOptions } from "./redis/leases.js";
import { logger } from "../runtime/log.js";
import { describeSpec, parseRedisSpec, REDIS_SPECS } from "./redis/connect.js";
import { RedisConnection } from "./redis/connection.js";
import { RedisNodes } from "./redis/nodes.js";
import { RedisTraits } from "./redis/traits.js";
import { RedisDefinitions } from "./redis/definitions.js";
import { keyLayout } from "./redis/keys.js";
import { Store } from "./store.js";
import { announceThroughRedis } from "./announce.js";

/** A store spec that names no store shardbridge knows, or does not parse. */
export class StoreSpecError extends Error {}

/**
 * Open the store named by `spec`: "memory" (the embedded default, state in this process
 * only) or Redis — one server (redis://host:port/db, rediss:// for TLS), a master
 * managed by Sentinel (redis+sentinel://...) or a Cluster (redis+cluster://...).
 */
export async function openStore(spec: string, options: RedisBackendOptions = {}): Promise<Store> {
  if (spec === "memory")
    return new Store(
      new MemoryLeases(),
      new MemoryNodes(),
      new MemoryTraits(undefined, options.ironicQueueMax),
    );
  let topology;
  try {
    topology = parseRedisSpec(spec);
  } catch (error) {
    throw new StoreSpecError((error as Error).message);
  }
  if (topology !== null) {
    let connection: RedisConnection;
    try {
      connection = await RedisConnection.open(topology, options);
    } catch (error) {
      throw new Error(`cannot reach Redis at ${describeSpec(spec)}: ${(error as Error).message}`);
    }
    // Every backend on the one connection, in the one key layout.
    const keys = keyLayout(options.namespace);
    const backend = new RedisLeases(connection, keys, options);
    const nodes = new RedisNodes(connection.client, keys.nodes);
    const traits = new RedisTraits(connection.client, keys, options.feedMaxEntries, options.ironicQueueMax);
    const definitions = new RedisDefinitions(connection.client, keys.definitions, connection.acks);
    // A store written by an older bridge: bring it to this layout before serving.
    const [shards, moved, records] = [
      await backend.buildDirectory(),
      await nodes.migrate(),
      await traits.migrate(),
    ];
    if (shards + moved + records > 0)
      logger.info("store migrated", {
        lease_directory_shards: shards,
        nodes_moved_to_indexed_layout: moved,
        trait_records_moved_to_buckets: records,
      });
    const store = new Store(backend, nodes, traits, backend.partitionOwners(), definitions);
    store.onClose(
      await announceThroughRedis(
        store.leaseChanges,
        connection.topology,
        options.namespace,
        options.commandTimeoutMs,
      ),
    );
    return store;
  }
  throw new StoreSpecError(`unknown store "${spec}": use "memory" or ${REDIS_SPECS}`);
}
