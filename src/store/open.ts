import { MemoryBackend } from "./memory.js";
import { RedisBackend, type RedisBackendOptions } from "./redis/backend.js";
import { Store } from "./store.js";

/**
 * Open the store named by `spec`: "memory" (the embedded default, state in this process
 * only) or a Redis URL (redis://host:port/db, rediss:// for TLS).
 */
export async function openStore(spec: string, options: RedisBackendOptions = {}): Promise<Store> {
  if (spec === "memory") return new Store(new MemoryBackend());
  if (/^rediss?:\/\//.test(spec)) return new Store(await RedisBackend.connect(spec, options));
  throw new Error(`unknown store "${spec}": use "memory" or a redis:// URL`);
}
