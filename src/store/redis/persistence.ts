import { Cluster, type Redis } from "ioredis";
import type { RedisClient } from "./connect.js";

/**
 * Why what `redis` holds would not outlive a restart of its server, or null: neither an
 * append-only file (INFO persistence `aof_enabled`) nor RDB snapshots (CONFIG GET save)
 * on the server, or on a Cluster on one of its masters. A server that refuses CONFIG (a
 * managed Redis may) is judged by its AOF alone, and the answer says so.
 */
export async function volatilityOf(redis: RedisClient): Promise<string | null> {
  const servers: Redis[] = redis instanceof Cluster ? redis.nodes("master") : [redis];
  for (const server of servers) {
    const aof = /^aof_enabled:1\r?$/m.test(await server.info("persistence"));
    if (aof) continue;
    let save: string | null;
    try {
      save = ((await server.config("GET", "save")) as string[])[1] ?? "";
    } catch {
      save = null;
    }
    if (save !== null && save.trim() !== "") continue;
    const where = redis instanceof Cluster ? ` (master ${server.options.host}:${server.options.port})` : "";
    return save === null
      ? `Redis${where} has no append-only file (appendonly no) and refuses CONFIG GET save, so RDB snapshots could not be checked`
      : `Redis${where} keeps neither an append-only file (appendonly no) nor RDB snapshots (save "")`;
  }
  return null;
}
