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
import { StreamIds, indexAfter } from "../../core/stream-ids.js";
import { MemoryIronicQueue } from "./ironic-queue.js";
import { IRONIC_QUEUE_MAX_ENTRIES } from "../ports/ironic-queue.js";

/** The index of the first entry of `feed` after `cursor` (see indexAfter). */
const entryAfter = (feed: readonly FeedEntry[], cursor: string | null): number =>
  indexAfter(feed, (entry) => entry.id, cursor);

/** Traits in this process's memory (the embedded store). */
export class MemoryTraits implements TraitBackend {
  private readonly records = new Map<string, TraitRecord>();
  private readonly deliveries = new Map<string, { outcome: string; expiresAt: number }>();
  private readonly feeds = new Map<string, FeedEntry[]>();
  private readonly cursors = new Map<string, string>();
  /** per shard, the newest entry trimmed off its feed */
  private readonly trimmed = new Map<string, string>();
  /** feed ids, "<ms>-<seq>" as Redis stream ids are, never going back */
  private readonly feedIds = new StreamIds();

  /** the queue of changes for Ironic, in this process too */
  readonly ironicQueue: MemoryIronicQueue;

  /**
   * `feedMaxEntries`: entries a feed keeps; `ironicQueueMax`: entries the Ironic queue
   * holds before it folds (tests pass small bounds).
   */
  constructor(
    private readonly feedMaxEntries = FEED_MAX_ENTRIES,
    ironicQueueMax = IRONIC_QUEUE_MAX_ENTRIES,
  ) {
    this.ironicQueue = new MemoryIronicQueue(ironicQueueMax);
  }

  async read(uuid: string): Promise<TraitRecord> {
    return this.recordOf(uuid);
  }

  async readMany(uuids: readonly string[]): Promise<TraitRecord[]> {
    return uuids.map((uuid) => this.recordOf(uuid));
  }

  /** A copy of `uuid`'s record (a caller's change must not reach the store's), empty for none yet. */
  private recordOf(uuid: string): TraitRecord {
    return structuredClone(this.records.get(uuid) ?? EMPTY_TRAIT_RECORD);
  }

  async commit(
    uuid: string,
    expected: number,
    next: TraitRecord,
    { feed, delivery, ironic }: CommitAlso = {},
  ): Promise<boolean> {
    if ((this.records.get(uuid)?.generation ?? 0) !== expected) return false;
    this.records.set(uuid, structuredClone(next));
    // Queued before the first await: a commit on the same node in between must queue after this one.
    if (ironic !== undefined) this.ironicQueue.enqueue(ironic);
    // The feed entry and the delivery's answer too, before any await, as the Redis script
    // writes them all at once: a copy of the delivery that reads the new record must also
    // find its answer.
    await Promise.all([
      feed !== undefined && this.appendFeed(feed.shard, feed.entry),
      delivery !== undefined && this.recordDelivery(delivery.id, delivery.answer, delivery.ttlSeconds),
    ]);
    return true;
  }

  async appendFeed(shard: string, entry: Omit<FeedEntry, "id">): Promise<void> {
    const entries = this.feeds.get(shard) ?? [];
    entries.push({ id: this.feedIds.next(), ...structuredClone(entry) });
    if (entries.length > this.feedMaxEntries) {
      const dropped = entries.splice(0, entries.length - this.feedMaxEntries);
      this.trimmed.set(shard, dropped.at(-1)!.id);
    }
    this.feeds.set(shard, entries);
  }

  async firstUnread(shards: readonly string[]): Promise<Array<string | null>> {
    return shards.map((shard) => {
      const feed = this.feeds.get(shard) ?? [];
      return feed[entryAfter(feed, this.cursors.get(shard) ?? null)]?.id ?? null;
    });
  }

  async readFeed(shard: string, limit: number): Promise<FeedRead> {
    const cursor = this.cursors.get(shard) ?? null;
    const feed = this.feeds.get(shard) ?? [];
    const from = entryAfter(feed, cursor);
    const trimmed = this.trimmed.get(shard);
    return {
      cursor,
      entries: structuredClone(feed.slice(from, from + limit)),
      trimmedPastCursor: trimmed !== undefined && (cursor === null || compareFeedIds(trimmed, cursor) > 0),
      newest: feed.at(-1)?.id ?? null,
    };
  }

  async ack(shard: string, id: string): Promise<string | null> {
    const cursor = this.cursors.get(shard);
    if (cursor !== undefined && compareFeedIds(id, cursor) <= 0) return cursor;
    const feed = this.feeds.get(shard) ?? [];
    if (feed[entryAfter(feed, id) - 1]?.id !== id) return null;
    this.cursors.set(shard, id);
    return id;
  }

  async delivery(id: string): Promise<string | null> {
    const seen = this.deliveries.get(id);
    if (seen === undefined || seen.expiresAt < Date.now()) return null;
    return seen.outcome;
  }

  async recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    this.deliveries.set(id, { outcome, expiresAt: Date.now() + ttlSeconds * 1000 });
  }
}
