import { StreamIds, indexAfter } from "../../core/stream-ids.js";
import { foldChanges } from "../ironic-queue-fold.js";
import {
  IRONIC_PARTITIONS,
  IRONIC_QUEUE_MAX_ENTRIES,
  UNDELIVERABLE_KEPT,
  mergedChange,
  partitionBound,
  partitionOf,
  queuedAtMs,
  type IronicEnqueue,
  type IronicQueue,
  type MergedRecord,
  type PendingChange,
  type QueueLayout,
  type QueueRead,
  type QueueStats,
  type QueuedChange,
  type Settlement,
  type Undeliverable,
} from "../ports/ironic-queue.js";

/** Folded records a read scans at most (as HSCAN's COUNT on Redis). */
const MERGED_SCAN = 100;

/**
 * One partition's stream: entries in id order, settled ones marked and swept out once
 * they are half of it (a splice per settle would be O(n) each).
 */
class PartitionStream {
  private entries: QueuedChange[] = [];
  private readonly live = new Set<string>();
  /** entries before this index are all settled */
  private head = 0;

  append(entry: QueuedChange): void {
    this.entries.push(entry);
    this.live.add(entry.id);
  }

  get length(): number {
    return this.live.size;
  }

  first(): QueuedChange | undefined {
    while (this.head < this.entries.length && !this.live.has(this.entries[this.head]!.id)) this.head++;
    return this.entries[this.head];
  }

  after(after: string | null, limit: number): QueuedChange[] {
    const found: QueuedChange[] = [];
    for (let i = indexAfter(this.entries, (e) => e.id, after); i < this.entries.length; i++) {
      if (found.length === limit) break;
      const entry = this.entries[i]!;
      if (this.live.has(entry.id)) found.push(structuredClone(entry));
    }
    return found;
  }

  remove(id: string): boolean {
    if (!this.live.delete(id)) return false;
    if (this.live.size * 2 < this.entries.length) {
      this.entries = this.entries.filter((e) => this.live.has(e.id));
      this.head = 0;
    }
    return true;
  }
}

/**
 * The queue in this process's memory (the embedded store): the same rules as in Redis,
 * lost when the process exits.
 */
export class MemoryIronicQueue implements IronicQueue {
  readonly durable = false;
  private readonly partitionBound: number;
  private readonly streams: PartitionStream[];
  /** per partition, node -> its folded record as stored (JSON) */
  private readonly merged: Array<Map<string, string>>;
  /** every folded node -> when its record began (the oldest pending, without parsing each) */
  private readonly mergedSince = new Map<string, number>();
  private readonly counters = { pending: 0, delivered: 0, given_up: 0, retried: 0, coalesced: 0 };
  /** oldest first, at most UNDELIVERABLE_KEPT */
  private readonly undeliverable: Undeliverable[] = [];
  private readonly workers = new Map<string, number>();
  private readonly ids = new StreamIds();

  constructor(
    maxEntries = IRONIC_QUEUE_MAX_ENTRIES,
    private readonly partitionCount = IRONIC_PARTITIONS,
  ) {
    this.partitionBound = partitionBound(maxEntries, partitionCount);
    this.streams = Array.from({ length: partitionCount }, () => new PartitionStream());
    this.merged = Array.from({ length: partitionCount }, () => new Map());
  }

  /** Queue one commit's changes (MemoryTraits.commit calls this in the same step). */
  enqueue({ node, deltas, generation }: IronicEnqueue): void {
    const partition = partitionOf(node, this.partitionCount);
    const stream = this.streams[partition]!;
    const merged = this.merged[partition]!;
    const folded = merged.get(node);
    if (folded === undefined && stream.length < this.partitionBound) {
      stream.append({ kind: "queued", id: this.ids.next(), node, deltas: [...deltas], generation });
      this.counters.pending += deltas.length;
      return;
    }
    const previous = folded === undefined ? null : (JSON.parse(folded) as MergedRecord);
    const { record, added } = foldChanges(previous, deltas, Date.now());
    merged.set(node, JSON.stringify(record));
    this.mergedSince.set(node, record.since);
    this.counters.pending += added;
    this.counters.coalesced += deltas.length;
  }

  async layout(): Promise<QueueLayout> {
    return { partitions: this.partitionCount, partitionBound: this.partitionBound };
  }

  async read(
    partition: number,
    after: string | null,
    limit: number,
    mergedCursor: string | null,
  ): Promise<QueueRead> {
    const entries = this.streams[partition]!.after(after, limit);
    const merged = this.merged[partition]!;
    if (mergedCursor === null || entries.length >= limit || merged.size === 0)
      return { entries, merged: [], mergedCursor: "" };
    // A cursor is a position in the records' order; past the end it goes round ("0").
    const start = Number(mergedCursor);
    const page = [...merged].slice(start, start + MERGED_SCAN);
    const next = start + MERGED_SCAN >= merged.size ? "0" : String(start + MERGED_SCAN);
    return { entries, merged: page.map(([node, stored]) => mergedChange(node, stored)), mergedCursor: next };
  }

  async settle(
    partition: number,
    change: PendingChange,
    outcome: Settlement,
  ): Promise<{ settled: boolean; nowMs: number }> {
    const nowMs = Date.now();
    if (change.kind === "queued") {
      if (!this.streams[partition]!.remove(change.id)) return { settled: false, nowMs };
    } else {
      const merged = this.merged[partition]!;
      if (merged.get(change.node) !== change.stored) return { settled: false, nowMs };
      merged.delete(change.node);
      this.mergedSince.delete(change.node);
    }
    this.counters.pending -= change.deltas.length;
    this.counters[outcome.kind] += 1;
    if (outcome.kind === "given_up") {
      this.undeliverable.push({
        node: change.node,
        deltas: change.deltas,
        reason: outcome.reason,
        atMs: nowMs,
      });
      if (this.undeliverable.length > UNDELIVERABLE_KEPT) this.undeliverable.shift();
    }
    return { settled: true, nowMs };
  }

  async countRetries(n: number): Promise<void> {
    this.counters.retried += n;
  }

  async heartbeat(worker: string, windowMs: number, leaving = false): Promise<number> {
    const nowMs = Date.now();
    if (leaving) this.workers.delete(worker);
    else this.workers.set(worker, nowMs);
    return [...this.workers.values()].filter((seen) => seen >= nowMs - windowMs).length;
  }

  async stats(recent: number, windowMs: number): Promise<QueueStats> {
    const nowMs = Date.now();
    let oldest = Infinity;
    for (const stream of this.streams) {
      const first = stream.first();
      if (first !== undefined) oldest = Math.min(oldest, queuedAtMs(first));
    }
    for (const since of this.mergedSince.values()) oldest = Math.min(oldest, since);
    return {
      pendingChanges: this.counters.pending,
      oldestPendingMs: oldest === Infinity ? 0 : Math.max(0, nowMs - oldest),
      queuedEntries: this.streams.reduce((sum, s) => sum + s.length, 0),
      mergedNodes: this.mergedSince.size,
      delivered: this.counters.delivered,
      given_up: this.counters.given_up,
      retried: this.counters.retried,
      coalesced: this.counters.coalesced,
      undeliverable: this.undeliverable.slice(-recent).reverse(),
      liveWorkers: [...this.workers.values()].filter((seen) => seen >= nowMs - windowMs).length,
    };
  }
}
