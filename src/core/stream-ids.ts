/**
 * Ids of entries in a stream (a shard's feed, a partition of the Ironic queue): "<ms>-<seq>"
 * as Redis numbers stream entries, increasing along a stream. The embedded store mints
 * them the same way, so both stores order and age entries alike.
 */

/** When an entry was appended, ms since the epoch: the first part of its id. */
export const streamIdMs = (id: string): number => Number(id.slice(0, id.indexOf("-")));

/** Compare two stream ids. */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(Number) as [number, number];
  const [bm, bs] = b.split("-").map(Number) as [number, number];
  return am !== bm ? am - bm : as - bs;
}

/** Mints increasing ids from the wall clock's ms, as Redis does (a clock stepping back stays put). */
export class StreamIds {
  private lastMs = 0;
  private lastSeq = 0;

  next(nowMs = Date.now()): string {
    if (nowMs > this.lastMs) [this.lastMs, this.lastSeq] = [nowMs, 0];
    else this.lastSeq += 1;
    return `${this.lastMs}-${this.lastSeq}`;
  }
}

/**
 * The index of the first id of `sorted` (increasing ids) after `after` (0 for null: the
 * whole list; the length when nothing is after it). A binary search: long streams are
 * searched on every read, and a scan would hold the event loop.
 */
export function indexAfter<T>(sorted: readonly T[], idOf: (item: T) => string, after: string | null): number {
  if (after === null) return 0;
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareStreamIds(idOf(sorted[middle]!), after) > 0) high = middle;
    else low = middle + 1;
  }
  return low;
}
