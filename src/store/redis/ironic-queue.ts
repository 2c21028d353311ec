import type { RedisClient } from "./connect.js";
import type { KeyLayout } from "./keys.js";
import { runScript, runScriptWithKeys } from "./scripts.js";
import { streamIdMs } from "../../core/stream-ids.js";
import {
  IRONIC_PARTITIONS,
  IRONIC_QUEUE_MAX_ENTRIES,
  UNDELIVERABLE_KEPT,
  mergedChange,
  partitionBound,
  partitionOf,
  type IronicEnqueue,
  type IronicQueue,
  type PendingChange,
  type QueueLayout,
  type QueueRead,
  type QueueStats,
  type QueuedChange,
  type Settlement,
  type Undeliverable,
} from "../ports/ironic-queue.js";

/** Folded records one read scans for (HSCAN's COUNT). */
const MERGED_SCAN = 100;

type StreamEntry = [id: string, fields: string[]];

/** A stream entry's fields as an object (XRANGE answers them as a flat list). */
function fieldsOf(fields: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i]!] = fields[i + 1]!;
  return out;
}

function queuedOf([id, fields]: StreamEntry): QueuedChange {
  const { n, g, d } = fieldsOf(fields);
  return { kind: "queued", id, node: n!, deltas: d!.split(" "), generation: Number(g) };
}

/**
 * The queue in Redis, under the `{nodes}` hash tag with the trait records it follows: a
 * stream per partition (an entry per commit, taken off once delivered, so the stream is
 * exactly what waits), a hash of folded records per partition past the bound, and
 * store-wide counters. Every script names its keys, all in one slot (Cluster-safe).
 */
export class RedisIronicQueue implements IronicQueue {
  readonly durable = true;
  private layoutRead: Promise<QueueLayout> | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeyLayout["ironic"],
    private readonly maxEntries = IRONIC_QUEUE_MAX_ENTRIES,
  ) {}

  /**
   * The store's partition count: the first bridge writes its own, every later one reads
   * it, so a node stays in one partition across versions with another default.
   */
  layout(): Promise<QueueLayout> {
    this.layoutRead ??= (async () => {
      const [, [, stored]] = (await this.redis
        .pipeline()
        .set(this.keys.partitions, IRONIC_PARTITIONS, "NX")
        .get(this.keys.partitions)
        .exec()) as [unknown, [Error | null, string]];
      const partitions = Number(stored);
      return { partitions, partitionBound: partitionBound(this.maxEntries, partitions) };
    })();
    // A failed read is not remembered: the next call asks again.
    this.layoutRead.catch(() => (this.layoutRead = undefined));
    return this.layoutRead;
  }

  /**
   * The keys and arguments traits-commit takes for the queue (KEYS[4..7], ARGV[8..9]):
   * the node's partition when there are changes for Ironic, stand-ins when there are none.
   */
  async commitArguments(change: IronicEnqueue | undefined): Promise<{ keys: string[]; args: string[] }> {
    if (change === undefined) return { keys: Array<string>(4).fill(this.keys.noQueue), args: ["", "0"] };
    const { partitions, partitionBound: bound } = await this.layout();
    const partition = partitionOf(change.node, partitions);
    return {
      keys: [this.keys.queue(partition), this.keys.merged(partition), this.keys.mergedSince, this.keys.stats],
      args: [change.deltas.join(" "), String(bound)],
    };
  }

  async read(
    partition: number,
    after: string | null,
    limit: number,
    mergedCursor: string | null,
  ): Promise<QueueRead> {
    const keys = [this.keys.queue(partition), this.keys.merged(partition)];
    const args = [after ?? "", limit, mergedCursor ?? "", MERGED_SCAN];
    const [entries, cursor, merged] = (await runScript(this.redis, "ironic-read", keys, args)) as [
      StreamEntry[],
      string,
      string[],
    ];
    const records: QueueRead["merged"] = [];
    for (let i = 0; i + 1 < merged.length; i += 2) records.push(mergedChange(merged[i]!, merged[i + 1]!));
    return { entries: entries.map(queuedOf), merged: records, mergedCursor: cursor };
  }

  async settle(
    partition: number,
    change: PendingChange,
    outcome: Settlement,
  ): Promise<{ settled: boolean; nowMs: number }> {
    const queued = change.kind === "queued";
    const keys = [
      queued ? this.keys.queue(partition) : this.keys.merged(partition),
      this.keys.mergedSince,
      this.keys.stats,
      this.keys.undeliverable,
    ];
    const record =
      outcome.kind === "given_up"
        ? JSON.stringify({ node: change.node, deltas: change.deltas, reason: outcome.reason })
        : "";
    const args = [
      change.kind,
      queued ? change.id : change.node,
      queued ? "" : change.stored,
      change.deltas.length,
      outcome.kind,
      record,
      UNDELIVERABLE_KEPT,
    ];
    const [settled, nowMs] = (await runScript(this.redis, "ironic-settle", keys, args)) as [number, number];
    return { settled: settled === 1, nowMs };
  }

  async countRetries(n: number): Promise<void> {
    await this.redis.hincrby(this.keys.stats, "retried", n);
  }

  async heartbeat(worker: string, windowMs: number, leaving = false): Promise<number> {
    const args = [worker, windowMs, leaving ? "1" : "0"];
    return (await runScript(this.redis, "ironic-workers", this.keys.workers, args)) as number;
  }

  async stats(recent: number, windowMs: number): Promise<QueueStats> {
    const { partitions } = await this.layout();
    const { stats, undeliverable, mergedSince, workers } = this.keys;
    const keys = [stats, undeliverable, mergedSince, workers];
    for (let p = 0; p < partitions; p++) keys.push(this.keys.queue(p));
    const [nowMs, counters, queuedEntries, oldest, mergedNodes, latest, liveWorkers] =
      (await runScriptWithKeys(this.redis, "ironic-stats", keys, [recent, windowMs])) as [
        number,
        string[],
        number,
        number,
        number,
        StreamEntry[],
        number,
      ];
    const count = fieldsOf(counters);
    const counted = (name: string) => Number(count[name] ?? 0);
    return {
      pendingChanges: counted("pending"),
      oldestPendingMs: oldest < 0 ? 0 : Math.max(0, nowMs - oldest),
      queuedEntries,
      mergedNodes,
      delivered: counted("delivered"),
      given_up: counted("given_up"),
      retried: counted("retried"),
      coalesced: counted("coalesced"),
      undeliverable: latest.map(([id, fields]): Undeliverable => {
        const { node, deltas, reason } = JSON.parse(fieldsOf(fields).r!) as Omit<Undeliverable, "atMs">;
        return { node, deltas, reason, atMs: streamIdMs(id) };
      }),
      liveWorkers,
    };
  }
}
