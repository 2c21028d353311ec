import { scanKeys, type RedisClient } from "./connect.js";
import type { KeyLayout } from "./keys.js";
import { runScript } from "./scripts.js";
import { RedisIronicQueue } from "./ironic-queue.js";
import { IRONIC_QUEUE_MAX_ENTRIES } from "../ports/ironic-queue.js";
import {
  EMPTY_TRAIT_RECORD,
  FEED_MAX_ENTRIES,
  compareFeedIds,
  type FeedRead,
  type CommitAlso,
  type FeedEntry,
  type TraitBackend,
  type TraitRecord,
} from "../ports/traits.js";

/** A record as stored: its generation (what the commit script compares), a tab, its JSON. */
const encode = (record: TraitRecord) => `${record.generation}\t${JSON.stringify(record)}`;
const decode = (stored: string) => JSON.parse(stored.slice(stored.indexOf("\t") + 1)) as TraitRecord;
/** A record as read: the stored one, or a fresh empty one for a node with none yet. */
const recordOf = (stored: string | null): TraitRecord =>
  stored === null ? structuredClone(EMPTY_TRAIT_RECORD) : decode(stored);

/**
 * Traits in Redis: each node's record in a bucket (a small hash per uuid prefix, as the
 * node data is kept: about a quarter of the memory of a key per node), under the
 * `{nodes}` hash tag, committed by compare-and-set on the generation.
 */
export class RedisTraits implements TraitBackend {
  private readonly keys: KeyLayout["traits"];
  /** the queue of changes for Ironic, in the same slot: commits fill it in their script */
  readonly ironicQueue: RedisIronicQueue;

  constructor(
    private readonly redis: RedisClient,
    layout: KeyLayout,
    /** entries a feed keeps, approximately (tests pass a small bound) */
    private readonly feedMaxEntries = FEED_MAX_ENTRIES,
    /** entries the Ironic queue holds before it folds (tests pass a small bound) */
    ironicQueueMax = IRONIC_QUEUE_MAX_ENTRIES,
  ) {
    this.keys = layout.traits;
    this.ironicQueue = new RedisIronicQueue(redis, layout.ironic, ironicQueueMax);
  }

  async read(uuid: string): Promise<TraitRecord> {
    return recordOf(await this.redis.hget(this.keys.bucket(uuid), uuid));
  }

  async readMany(uuids: readonly string[]): Promise<TraitRecord[]> {
    if (uuids.length === 0) return [];
    // Sent together, not as an ioredis pipeline (see RedisLeases.agent).
    const stored = await Promise.all(uuids.map((uuid) => this.redis.hget(this.keys.bucket(uuid), uuid)));
    return stored.map(recordOf);
  }

  async commit(
    uuid: string,
    expected: number,
    next: TraitRecord,
    { feed, delivery, ironic }: CommitAlso = {},
  ): Promise<boolean> {
    const queue = await this.ironicQueue.commitArguments(ironic);
    const keys = [
      this.keys.bucket(uuid),
      feed ? this.keys.feed(feed.shard) : this.keys.noFeed,
      delivery ? this.keys.delivery(delivery.id) : this.keys.noDelivery,
      ...queue.keys,
    ];
    const args = [
      uuid,
      String(expected),
      encode(next),
      feed ? JSON.stringify(feed.entry) : "",
      String(this.feedMaxEntries),
      delivery?.answer ?? "",
      String(delivery?.ttlSeconds ?? 0),
      ...queue.args,
    ];
    return (await runScript(this.redis, "traits-commit", keys, args)) === 1;
  }

  /**
   * Move trait records an older bridge kept as one hash per node into buckets: a SCAN
   * at connect (the keyspace holds buckets, not a key per node, so it is short). Answers
   * how many it moved.
   */
  async migrate(): Promise<number> {
    let moved = 0;
    for await (const keys of scanKeys(this.redis, this.keys.legacyPattern))
      for (const key of keys) {
        const json = await this.redis.hget(key, "record");
        const uuid = key.slice(this.keys.legacyRecord("").length);
        if (json !== null)
          await this.redis.hset(this.keys.bucket(uuid), uuid, encode(JSON.parse(json) as TraitRecord));
        await this.redis.del(key);
        moved++;
      }
    return moved;
  }

  async appendFeed(shard: string, entry: Omit<FeedEntry, "id">): Promise<void> {
    const maxLength = String(this.feedMaxEntries);
    await this.redis.xadd(this.keys.feed(shard), "MAXLEN", "~", maxLength, "*", "e", JSON.stringify(entry));
  }

  async readFeed(shard: string, limit: number): Promise<FeedRead> {
    const feed = this.keys.feed(shard);
    const cursor = await this.redis.get(this.keys.cursor(shard));
    const from = cursor === null ? "-" : `(${cursor}`;
    // The entries and the stream's ends in one round trip, not two.
    const [raw, { trimmed, first, newest }] = await Promise.all([
      this.redis.xrange(feed, from, "+", "COUNT", limit),
      this.streamEnds(feed),
    ]);
    const entries = raw.map(([id, fields]) => ({ id, ...(JSON.parse(fields[1]!) as Omit<FeedEntry, "id">) }));
    // Every trimmed entry is older than the oldest kept one: a cursor behind that may have
    // missed some. (When only the cursor's own entry went, the resync is needless but safe.)
    const trimmedPastCursor =
      trimmed && (cursor === null || (first !== null && compareFeedIds(cursor, first) < 0));
    return { cursor, entries, trimmedPastCursor, newest };
  }

  /**
   * Whether a stream was ever trimmed (Redis counts every entry added; fewer are left),
   * its oldest and its newest entry. (XINFO's max-deleted-entry-id would name the newest
   * trimmed id, but Redis 7.0 moves it on XDEL only, not on trimming: measured.)
   */
  private async streamEnds(
    key: string,
  ): Promise<{ trimmed: boolean; first: string | null; newest: string | null }> {
    let info: unknown[];
    try {
      info = (await this.redis.xinfo("STREAM", key)) as unknown[];
    } catch {
      return { trimmed: false, first: null, newest: null }; // no such stream yet
    }
    const field = (name: string) => info[info.indexOf(name) + 1];
    const idOf = (entry: unknown) => (entry as [string, unknown] | null)?.[0] ?? null;
    return {
      trimmed: Number(field("entries-added")) > Number(field("length")),
      first: idOf(field("first-entry")),
      newest: idOf(field("last-entry")),
    };
  }

  async firstUnread(shards: readonly string[]): Promise<Array<string | null>> {
    if (shards.length === 0) return [];
    // Two round trips for any number of shards: every cursor, then the entry after each.
    const cursors = await this.redis.mget(...shards.map((shard) => this.keys.cursor(shard)));
    const entries = await Promise.all(
      shards.map((shard, i) =>
        this.redis.xrange(
          this.keys.feed(shard),
          cursors[i] === null ? "-" : `(${cursors[i]}`,
          "+",
          "COUNT",
          1,
        ),
      ),
    );
    return entries.map((first) => first[0]?.[0] ?? null);
  }

  async ack(shard: string, id: string): Promise<string | null> {
    const keys = [this.keys.cursor(shard), this.keys.feed(shard)];
    return (await runScript(this.redis, "feed-ack", keys, [id])) as string | null;
  }

  async delivery(id: string): Promise<string | null> {
    return this.redis.get(this.keys.delivery(id));
  }

  async recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(this.keys.delivery(id), outcome, "EX", ttlSeconds);
  }
}
