import { createHash } from "node:crypto";

/**
 * The queue of trait changes for Ironic: what a trait commit hands over (in the same
 * atomic step as the commit itself), what a delivery worker reads, and what it settles
 * once Ironic has a change (or it is given up). The store holds it: in Redis it survives
 * any bridge; the embedded store keeps it in the bridge's memory.
 *
 * A node's changes all go to one partition (by its uuid). Each partition has one owner at
 * a time (a lease, see src/bridge/ironic/delivery.ts), which delivers a node's changes in the
 * order they were committed; partitions spread the work over bridges.
 */

/** Partitions a new store is set up with (a store keeps the count it began with). */
export const IRONIC_PARTITIONS = 16;

/**
 * Queued entries (one per commit) the whole queue holds before further changes are folded
 * (see ironic-enqueue.lua): split evenly over the partitions.
 */
export const IRONIC_QUEUE_MAX_ENTRIES = 100_000;

/** Changes given up that the store keeps to show (each is also logged, and counted). */
export const UNDELIVERABLE_KEPT = 1000;

/** The partition of a node: its uuid's SHA-1, first 32 bits, modulo the count. */
export function partitionOf(uuid: string, partitions: number): number {
  return createHash("sha1").update(uuid).digest().readUInt32BE(0) % partitions;
}

/** Each partition's share of the queue's bound, at least one entry. */
export const partitionBound = (maxEntries: number, partitions: number): number =>
  Math.max(1, Math.ceil(maxEntries / partitions));

/** One commit's changes for one node, as the commit hands them over. */
export interface IronicEnqueue {
  node: string;
  /** "+TRAIT" / "-TRAIT", each trait once */
  deltas: string[];
  /** the node's trait generation this commit made */
  generation: number;
}

/** A queued commit's changes: a stream entry. */
export interface QueuedChange {
  kind: "queued";
  /** "<ms>-<seq>", increasing along its partition; the ms is when it was queued (store clock) */
  id: string;
  node: string;
  deltas: string[];
  generation: number;
}

/** A node's changes folded past the queue's bound: one sign per trait, the last committed. */
export interface MergedChange {
  kind: "merged";
  node: string;
  deltas: string[];
  /** when the record began, store ms */
  sinceMs: number;
  /** the record as read: settling takes it only if it is still this */
  stored: string;
}

export type PendingChange = QueuedChange | MergedChange;

/** When a pending change was first queued, store ms. */
export const queuedAtMs = (change: PendingChange): number =>
  change.kind === "merged" ? change.sinceMs : Number(change.id.slice(0, change.id.indexOf("-")));

/** A folded record as stored (the Lua encodes the same fields with cjson). */
export interface MergedRecord {
  since: number;
  traits: Record<string, "+" | "-">;
}

export function mergedChange(node: string, stored: string): MergedChange {
  const record = JSON.parse(stored) as MergedRecord;
  return {
    kind: "merged",
    node,
    deltas: Object.entries(record.traits).map(([trait, sign]) => `${sign}${trait}`),
    sinceMs: record.since,
    stored,
  };
}

/** What one read of a partition found. */
export interface QueueRead {
  /** entries after the one asked for, oldest first */
  entries: QueuedChange[];
  /**
   * folded records, only when the read reached the end of the partition's stream (so
   * every entry a record must follow has been read): part of a scan
   */
  merged: MergedChange[];
  /** the scan's next cursor ("0": it went round), "" when no records were scanned */
  mergedCursor: string;
}

/** How a change left the queue. */
export type Settlement = { kind: "delivered" } | { kind: "given_up"; reason: string };

/** A change given up, as the store keeps the latest ones. */
export interface Undeliverable {
  node: string;
  deltas: string[];
  reason: string;
  /** when it was given up, ms since the epoch (store clock) */
  atMs: number;
}

/** The queue as a whole, store-wide (every bridge reads the same). */
export interface QueueStats {
  /** changes queued and not yet in Ironic nor given up */
  pendingChanges: number;
  /** how long the oldest of them has waited, ms by the store's clock (0: none) */
  oldestPendingMs: number;
  /** stream entries (one per commit) queued */
  queuedEntries: number;
  /** nodes whose changes are folded past the bound */
  mergedNodes: number;
  /** changes or folded records taken off the queue, by outcome */
  delivered: number;
  given_up: number;
  /** attempts that failed and were tried again */
  retried: number;
  /** changes folded into a node's record instead of queued (past the bound) */
  coalesced: number;
  /** the latest changes given up, newest first */
  undeliverable: Undeliverable[];
  /** delivery workers heard from within the liveness window */
  liveWorkers: number;
}

/** How a store's queue is cut: its partitions, and the entries each holds before folding. */
export interface QueueLayout {
  partitions: number;
  partitionBound: number;
}

export interface IronicQueue {
  /** true when the queue outlives this process (Redis), false in the embedded store */
  readonly durable: boolean;
  /** the store's partition count (set once, by the first bridge to use it) and bound */
  layout(): Promise<QueueLayout>;
  /**
   * Entries of `partition` after `after` (null: from its start), at most `limit`; with
   * `mergedCursor` (not null) and the end of the stream reached, a step of the scan of
   * its folded records.
   */
  read(
    partition: number,
    after: string | null,
    limit: number,
    mergedCursor: string | null,
  ): Promise<QueueRead>;
  /**
   * Take a change off the queue, counted by its outcome; a given-up change is kept among
   * the undeliverable. `settled` false: it was gone (settled already) or, for a folded
   * record, changed since it was read. `nowMs`: the store's clock.
   */
  settle(
    partition: number,
    change: PendingChange,
    outcome: Settlement,
  ): Promise<{ settled: boolean; nowMs: number }>;
  /** count `n` failed attempts that will be tried again */
  countRetries(n: number): Promise<void>;
  /**
   * A worker's heartbeat (or, with `leaving`, its goodbye): answers how many workers
   * were heard from within `windowMs`, by the store's clock.
   */
  heartbeat(worker: string, windowMs: number, leaving?: boolean): Promise<number>;
  /** the whole queue; `recent` undeliverable records, workers live within `windowMs` */
  stats(recent: number, windowMs: number): Promise<QueueStats>;
}
