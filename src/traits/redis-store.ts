import type { Redis } from "ioredis";
import type { KeyLayout } from "../store/redis/keys.js";
import { runScript } from "../store/redis/scripts.js";
import {
  EMPTY_TRAIT_RECORD,
  type FeedAppend,
  type FeedEntry,
  type TraitBackend,
  type TraitRecord,
} from "./store-port.js";

/**
 * Feed entries kept per shard (approximately: Redis trims whole stream nodes). An agent
 * away for more changes than this needs a full resync.
 */
const FEED_MAX_ENTRIES = 100_000;

/** Traits in Redis: one hash per node under the `{nodes}` hash tag, committed by CAS. */
export class RedisTraits implements TraitBackend {
  private readonly keys: KeyLayout["traits"];

  constructor(
    private readonly redis: Redis,
    private readonly layout: KeyLayout,
  ) {
    this.keys = layout.traits;
  }

  async read(uuid: string): Promise<TraitRecord> {
    const json = await this.redis.hget(this.keys.record(uuid), "record");
    return json === null ? structuredClone(EMPTY_TRAIT_RECORD) : (JSON.parse(json) as TraitRecord);
  }

  async commit(uuid: string, expected: number, next: TraitRecord, feed?: FeedAppend): Promise<boolean> {
    const keys = [this.keys.record(uuid), feed ? this.keys.feed(feed.shard) : this.keys.noFeed];
    const args = [
      String(expected),
      JSON.stringify(next),
      String(next.generation),
      feed ? JSON.stringify(feed.entry) : "",
      String(FEED_MAX_ENTRIES),
    ];
    return (await runScript(this.redis, "traits-commit", keys, args)) === 1;
  }

  async appendFeed(shard: string, entry: Omit<FeedEntry, "id">): Promise<void> {
    const maxLength = String(FEED_MAX_ENTRIES);
    await this.redis.xadd(this.keys.feed(shard), "MAXLEN", "~", maxLength, "*", "e", JSON.stringify(entry));
  }

  async readFeed(shard: string, limit: number): Promise<{ cursor: string | null; entries: FeedEntry[] }> {
    const cursor = await this.redis.get(this.keys.cursor(shard));
    const from = cursor === null ? "-" : `(${cursor}`;
    const raw = await this.redis.xrange(this.keys.feed(shard), from, "+", "COUNT", limit);
    const entries = raw.map(([id, fields]) => ({ id, ...(JSON.parse(fields[1]!) as Omit<FeedEntry, "id">) }));
    return { cursor, entries };
  }

  async ack(shard: string, id: string): Promise<string | null> {
    const keys = [this.keys.cursor(shard), this.keys.feed(shard)];
    return (await runScript(this.redis, "feed-ack", keys, [id])) as string | null;
  }

  async delivery(id: string): Promise<string | null> {
    return this.redis.get(this.layout.delivery(id));
  }

  async recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(this.layout.delivery(id), outcome, "EX", ttlSeconds);
  }
}
