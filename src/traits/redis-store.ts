import type { Redis } from "ioredis";
import { runScript } from "../store/redis/scripts.js";
import {
  EMPTY_TRAIT_RECORD,
  type FeedAppend,
  type FeedEntry,
  type TraitBackend,
  type TraitRecord,
} from "./store-port.js";

/** Traits in Redis: one hash per node under the `{nodes}` hash tag, committed by CAS. */
export class RedisTraits implements TraitBackend {
  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
  ) {}

  private key(uuid: string): string {
    return `${this.namespace}:{nodes}:traits:${uuid}`;
  }

  async read(uuid: string): Promise<TraitRecord> {
    const json = await this.redis.hget(this.key(uuid), "record");
    return json === null ? structuredClone(EMPTY_TRAIT_RECORD) : (JSON.parse(json) as TraitRecord);
  }

  /** Feeds and their cursors share the {nodes} tag: a commit and its feed entry are one script. */
  private feedKey(shard: string): string {
    return `${this.namespace}:{nodes}:feed:${shard}`;
  }

  private cursorKey(shard: string): string {
    return `${this.namespace}:{nodes}:cursor:${shard}`;
  }

  async commit(uuid: string, expected: number, next: TraitRecord, feed?: FeedAppend): Promise<boolean> {
    // Unsharded nodes have no active agent to feed; the script skips the (unused) key.
    const keys = [this.key(uuid), feed ? this.feedKey(feed.shard) : `${this.namespace}:{nodes}:nofeed`];
    const args = [
      String(expected),
      JSON.stringify(next),
      String(next.generation),
      feed ? JSON.stringify(feed.entry) : "",
    ];
    return (await runScript(this.redis, "traits-commit", keys, args)) === 1;
  }

  async appendFeed(shard: string, entry: Omit<FeedEntry, "id">): Promise<void> {
    await this.redis.xadd(this.feedKey(shard), "MAXLEN", "~", "100000", "*", "e", JSON.stringify(entry));
  }

  async readFeed(shard: string, limit: number): Promise<{ cursor: string | null; entries: FeedEntry[] }> {
    const cursor = await this.redis.get(this.cursorKey(shard));
    const from = cursor === null ? "-" : `(${cursor}`;
    const raw = await this.redis.xrange(this.feedKey(shard), from, "+", "COUNT", limit);
    const entries = raw.map(([id, fields]) => ({ id, ...(JSON.parse(fields[1]!) as Omit<FeedEntry, "id">) }));
    return { cursor, entries };
  }

  async ack(shard: string, id: string): Promise<string> {
    return (await runScript(this.redis, "feed-ack", this.cursorKey(shard), [id])) as string;
  }

  async delivery(id: string): Promise<string | null> {
    return this.redis.get(`${this.namespace}:delivery:${id}`);
  }

  async recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(`${this.namespace}:delivery:${id}`, outcome, "EX", ttlSeconds);
  }
}
