import { MemoryTraits } from "../traits/memory-store.js";
import { MemoryNodes } from "../nodes/memory.js";
import { MemoryBackend } from "./memory.js";
import { RedisBackend, type RedisBackendOptions } from "./redis/backend.js";
import { logger } from "../log.js";
import { Store } from "./store.js";

/** The URL without its password, fit for logs and error messages. */
function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable URL)";
  }
}

/**
 * Open the store named by `spec`: "memory" (the embedded default, state in this process
 * only) or a Redis URL (redis://host:port/db, rediss:// for TLS).
 */
export async function openStore(spec: string, options: RedisBackendOptions = {}): Promise<Store> {
  if (spec === "memory") return new Store(new MemoryBackend(), new MemoryNodes(), new MemoryTraits());
  if (/^rediss?:\/\//.test(spec)) {
    let backend: RedisBackend;
    try {
      backend = await RedisBackend.connect(spec, options);
    } catch (error) {
      throw new Error(`cannot reach Redis at ${redacted(spec)}: ${(error as Error).message}`);
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
    return new Store(backend, nodes, traits);
  }
  throw new Error(`unknown store "${spec}": use "memory" or a redis:// URL`);
}
