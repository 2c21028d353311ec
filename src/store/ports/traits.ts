import type { HeldTraits } from "../../core/traits/delta.js";
import type { IronicEnqueue, IronicQueue } from "./ironic-queue.js";

/** A node's traits as stored: holders, generation, and the newest order applied per source. */
export interface TraitRecord extends HeldTraits {
  /** source -> the highest inspection order (finish time in ms, or a sequence) applied */
  lastOrder: Record<string, number>;
}

/** One applied change, as the active agent of the node's shard reads it from the feed. */
export interface FeedEntry {
  /** position in the shard's feed, increasing; opaque (a Redis stream id) */
  id: string;
  node: string;
  deltas: string[];
  generation: number;
  /** true: the node's whole trait set, for a node that just moved into this shard */
  snapshot?: true;
}

/**
 * Entries a shard's feed keeps (approximately on Redis, which trims whole stream nodes).
 * An agent whose cursor falls behind the oldest kept entry resyncs from a snapshot.
 */
export const FEED_MAX_ENTRIES = 100_000;

/** What a read of a shard's feed finds after its cursor. */
export interface FeedRead {
  cursor: string | null;
  entries: FeedEntry[];
  /**
   * Entries after the cursor were trimmed away: the entries are not the whole story, and
   * the reader needs the shard's current traits (TraitService.readFeed gives them). Also
   * when nothing was ever acknowledged and the feed was trimmed.
   */
  trimmedPastCursor: boolean;
  /** the newest entry now, the id a resync resumes after; null for an empty feed */
  newest: string | null;
}

/** Feed ids are stream ids: when an entry was appended, and their order. */
export { streamIdMs as feedIdMs, compareStreamIds as compareFeedIds } from "../../core/stream-ids.js";

/** A webhook delivery's answer, remembered with the commit it led to, for `ttlSeconds`. */
export interface DeliveryRecord {
  id: string;
  answer: string;
  ttlSeconds: number;
}

/** A feed entry to append with a commit: which shard's feed, and what. */
export interface FeedAppend {
  shard: string;
  entry: Omit<FeedEntry, "id">;
}

/** What a commit writes besides the record, in the same atomic step. */
export interface CommitAlso {
  feed?: FeedAppend | undefined;
  delivery?: DeliveryRecord | undefined;
  /** the changes for Ironic, when the bridge delivers to one */
  ironic?: IronicEnqueue | undefined;
}

export const EMPTY_TRAIT_RECORD: TraitRecord = Object.freeze({ holders: {}, generation: 0, lastOrder: {} });

/**
 * Where node traits live. Changes are compare-and-set on the generation: the rules run
 * in TypeScript (src/core/traits/delta.ts, the one definition), and a commit lands only if
 * nobody committed in between, atomically (one Lua script on Redis).
 */
export interface TraitBackend {
  read(uuid: string): Promise<TraitRecord>;
  /** the records of `uuids`, in their order, in one round trip (a page of a shard's nodes) */
  readMany(uuids: readonly string[]): Promise<TraitRecord[]>;
  /**
   * Store `next` if the stored generation is still `expected`, and in the same atomic
   * step append `feed.entry` to `feed.shard`'s feed, remember `delivery` and queue
   * `ironic`'s changes for Ironic; answers whether it did.
   */
  commit(uuid: string, expected: number, next: TraitRecord, with_?: CommitAlso): Promise<boolean>;
  /** the queue of trait changes for Ironic, on the same store (commits fill it) */
  readonly ironicQueue: IronicQueue;
  /** append an entry to `shard`'s feed (a snapshot for a node that moved in) */
  appendFeed(shard: string, entry: Omit<FeedEntry, "id">): Promise<void>;
  /** entries of `shard`'s feed after its acknowledged cursor, oldest first (see FeedRead) */
  readFeed(shard: string, limit: number): Promise<FeedRead>;
  /**
   * Per shard, the oldest entry of its feed after its cursor (null: none, the agent has
   * read everything). Its id's first part is the time it was appended (ms): the feed's lag.
   */
  firstUnread(shards: readonly string[]): Promise<Array<string | null>>;
  /**
   * Move `shard`'s cursor forward to `id`, an entry of its feed (never back: an id at or
   * behind the cursor leaves it where it is). Answers the cursor, or null — and moves
   * nothing — when `id` is past the cursor but no entry of the feed.
   */
  ack(shard: string, id: string): Promise<string | null>;
  /** the recorded outcome of a webhook delivery, if this id was seen */
  delivery(id: string): Promise<string | null>;
  /** remember a delivery's outcome for `ttlSeconds` */
  recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void>;
}
