import {
  EMPTY_TRAIT_RECORD,
  FEED_MAX_ENTRIES,
  compareFeedIds,
  type FeedRead,
  type DeliveryRecord,
  type FeedAppend,
  type FeedEntry,
  type TraitBackend,
  type TraitRecord,
} from "./store-port.js";

/**
 * The index of the first entry of `feed` after `cursor` (0 for none: the whole feed;
 * feed.length when nothing is after it). Ids only increase along a feed, so this is a
 * binary search: a feed keeps up to 100,000 entries, and a scan of them on every read,
 * acknowledgement and GET /v1/shards would hold the event loop.
 */
function indexAfter(feed: readonly FeedEntry[], cursor: string | null): number {
  if (cursor === null) return 0;
  let low = 0;
  let high = feed.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareFeedIds(feed[middle]!.id, cursor) > 0) high = middle;
    else low = middle + 1;
  }
  return low;
}

/** Traits in this process's memory (the embedded store). */
export class MemoryTraits implements TraitBackend {
  private readonly records = new Map<string, TraitRecord>();
  private readonly deliveries = new Map<string, { outcome: string; expiresAt: number }>();
  private readonly feeds = new Map<string, FeedEntry[]>();
  private readonly cursors = new Map<string, string>();
  /** per shard, the newest entry trimmed off its feed */
  private readonly trimmed = new Map<string, string>();
  /** the last feed id's two parts: ids are "<ms>-<seq>" as Redis stream ids are, never going back */
  private lastMs = 0;
  private lastSeq = 0;

  /** `feedMaxEntries`: entries a feed keeps (tests pass a small bound). */
  constructor(private readonly feedMaxEntries = FEED_MAX_ENTRIES) {}

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
    feed?: FeedAppend,
    delivery?: DeliveryRecord,
  ): Promise<boolean> {
    if ((this.records.get(uuid)?.generation ?? 0) !== expected) return false;
    this.records.set(uuid, structuredClone(next));
    if (feed !== undefined) await this.appendFeed(feed.shard, feed.entry);
    if (delivery !== undefined) await this.recordDelivery(delivery.id, delivery.answer, delivery.ttlSeconds);
    return true;
  }

  async appendFeed(shard: string, entry: Omit<FeedEntry, "id">): Promise<void> {
    const entries = this.feeds.get(shard) ?? [];
    entries.push({ id: this.nextFeedId(), ...structuredClone(entry) });
    if (entries.length > this.feedMaxEntries) {
      const dropped = entries.splice(0, entries.length - this.feedMaxEntries);
      this.trimmed.set(shard, dropped.at(-1)!.id);
    }
    this.feeds.set(shard, entries);
  }

  /** The next feed id: the wall clock's ms, as Redis mints stream ids (a clock stepping back stays put). */
  private nextFeedId(): string {
    const now = Date.now();
    if (now > this.lastMs) [this.lastMs, this.lastSeq] = [now, 0];
    else this.lastSeq += 1;
    return `${this.lastMs}-${this.lastSeq}`;
  }

  async firstUnread(shards: readonly string[]): Promise<Array<string | null>> {
    return shards.map((shard) => {
      const feed = this.feeds.get(shard) ?? [];
      return feed[indexAfter(feed, this.cursors.get(shard) ?? null)]?.id ?? null;
    });
  }

  async readFeed(shard: string, limit: number): Promise<FeedRead> {
    const cursor = this.cursors.get(shard) ?? null;
    const feed = this.feeds.get(shard) ?? [];
    const from = indexAfter(feed, cursor);
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
    if (feed[indexAfter(feed, id) - 1]?.id !== id) return null;
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
