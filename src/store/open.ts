import { MemoryTraits } from "./memory/traits.js";
import { MemoryNodes } from "./memory/nodes.js";
import { MemoryLeases } from "./memory/leases.js";
import { RedisLeases, type RedisBackendOptions } from "./redis/leases.js";
import { logger } from "../runtime/log.js";
import { describeSpec, parseRedisSpec, REDIS_SPECS } from "./redis/connect.js";
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
    let backend: RedisLeases;
    try {
      backend = await RedisLeases.connect(topology, options);
    } catch (error) {
      throw new Error(`cannot reach Redis at ${describeSpec(spec)}: ${(error as Error).message}`);
    }
    const nodes = backend.nodeBackend();
    const traits = backend.traitBackend();
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
    const store = new Store(backend, nodes, traits, backend.partitionOwners(), backend.definitionBackend());
    store.onClose(
      await announceThroughRedis(
        store.leaseChanges,
        backend.topology,
        options.namespace,
        options.commandTimeoutMs,
      ),
    );
    return store;
  }
  throw new StoreSpecError(`unknown store "${spec}": use "memory" or ${REDIS_SPECS}`);
}
