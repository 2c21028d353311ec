/**
 * A set of strings kept in order, for the embedded store's node indexes: pages in uuid
 * order after a marker in O(log n + page), inserts and deletes in O(n / BUCKETS). Strings
 * are spread over sorted buckets by their first two characters (hex digits for uuids), so
 * no operation ever sorts or shifts the whole set: a 100,000-node index never holds the
 * event loop.
 */
export class OrderedSet {
  /** bucket key (first two characters) -> its members, sorted */
  private readonly buckets = new Map<string, string[]>();
  /** bucket keys, sorted */
  private keys: string[] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(value: string): boolean {
    const key = value.slice(0, 2);
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = [];
      this.buckets.set(key, bucket);
      this.keys.splice(upperBound(this.keys, key), 0, key);
    }
    const at = lowerBound(bucket, value);
    if (bucket[at] === value) return false;
    bucket.splice(at, 0, value);
    this.count++;
    return true;
  }

  delete(value: string): boolean {
    const key = value.slice(0, 2);
    const bucket = this.buckets.get(key);
    if (bucket === undefined) return false;
    const at = lowerBound(bucket, value);
    if (bucket[at] !== value) return false;
    bucket.splice(at, 1);
    this.count--;
    if (bucket.length === 0) {
      this.buckets.delete(key);
      this.keys.splice(lowerBound(this.keys, key), 1);
    }
    return true;
  }

  has(value: string): boolean {
    const bucket = this.buckets.get(value.slice(0, 2));
    return bucket !== undefined && bucket[lowerBound(bucket, value)] === value;
  }

  /** Up to `limit` members after `marker` (all from the start without one), in order. */
  after(marker: string | undefined, limit: number): string[] {
    const out: string[] = [];
    const start = marker === undefined ? 0 : lowerBound(this.keys, marker.slice(0, 2));
    for (let k = start; k < this.keys.length && out.length < limit; k++) {
      const bucket = this.buckets.get(this.keys[k]!)!;
      let i = marker === undefined ? 0 : upperBound(bucket, marker);
      while (i < bucket.length && out.length < limit) out.push(bucket[i++]!);
    }
    return out;
  }
}

/** First index whose element is >= value. */
function lowerBound(sorted: readonly string[], value: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose element is > value. */
function upperBound(sorted: readonly string[], value: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
