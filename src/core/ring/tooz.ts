import { createHash } from "node:crypto";
import type { LegacyRing } from "./kinds.js";

/** Points per member in nova's ring (nova.virt.ironic.driver._HASH_RING_PARTITIONS = 2**5). */
export const NOVA_PARTITIONS = 32;

/**
 * A ring point: the 16 MD5 bytes as a "binary" (latin1) string. Each char is one byte (0..255) and the
 * width is fixed, so string order is the order of the 128-bit big-endian numbers tooz
 * compares, at half the length of hex.
 */
type Point = string;

const md5Point = (data: string): Point => createHash("md5").update(data, "utf8").digest("binary");

/**
 * tooz 3.1's HashRing as nova 26's ironic driver uses it, bit for bit. Pure: no clock, no I/O.
 *
 * Member m owns `partitions` points: MD5 of m's UTF-8 bytes repeated 2, 3, … partitions+1
 * times (tooz feeds the key into one running MD5 and reads it after every update). A key
 * hashes to MD5(key) and belongs to the member of the first point strictly greater
 * (bisect_right), wrapping to the first point. Members are kept as given: nova lower-cases
 * hosts before building the ring, and `novaRing` does the same.
 */
export class ToozRing implements LegacyRing {
  readonly kind = "tooz";
  /** sorted points */
  private readonly points: Point[];
  /** point -> member */
  private readonly owner = new Map<Point, string>();
  readonly members: readonly string[];
  private readonly memberSet: ReadonlySet<string>;

  constructor(members: Iterable<string>, partitions = NOVA_PARTITIONS) {
    if (!Number.isInteger(partitions) || partitions < 1)
      throw new RangeError("partitions must be a positive integer");
    const unique = [...new Set(members)].sort();
    this.members = unique;
    this.memberSet = new Set(unique);
    for (const member of unique) {
      const running = createHash("md5").update(member, "utf8");
      for (let r = 0; r < partitions; r++) {
        running.update(member, "utf8");
        // An exact 128-bit collision between members would let the member tooz adds last
        // (Python set order) win; with MD5 points that is not a case to design for.
        this.owner.set(running.copy().digest("binary"), member);
      }
    }
    // Default sort compares UTF-16 code units; latin1 chars are single units 0..255: byte order.
    this.points = [...this.owner.keys()].sort();
  }

  /** Index of the first point strictly greater than `hash`, wrapping to 0 (tooz _get_partition). */
  private partitionOf(hash: Point): number {
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]! <= hash) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.points.length ? lo : 0;
  }

  /**
   * tooz get_nodes: walking the ring from the key's point, the first `replicas` distinct
   * members not in `ignore` (fewer when fewer remain; none when the ring is empty).
   * Answered in walk order; tooz answers a set.
   */
  lookup(key: string, options: { ignore?: Iterable<string>; replicas?: number } = {}): string[] {
    const ignore = new Set(options.ignore ?? []);
    let candidates = this.members.length;
    for (const m of ignore) if (this.memberSet.has(m)) candidates--;
    const wanted = Math.min(options.replicas ?? 1, candidates);
    const found: string[] = [];
    if (wanted <= 0) return found;
    let at = this.partitionOf(md5Point(key));
    while (found.length < wanted) {
      const member = this.owner.get(this.points[at]!)!;
      if (!ignore.has(member) && !found.includes(member)) found.push(member);
      at = at + 1 < this.points.length ? at + 1 : 0;
    }
    return found;
  }

  /** The one member a key belongs to (nova's replicas=1), or null for an empty ring. */
  memberOf(key: string): string | null {
    if (this.points.length === 0) return null;
    return this.owner.get(this.points[this.partitionOf(md5Point(key))]!)!;
  }
}

/** Nova's ring over compute hosts: hosts lower-cased, 32 points each. */
export function novaRing(hosts: Iterable<string>): ToozRing {
  return new ToozRing(
    [...hosts].map((h) => h.toLowerCase()),
    NOVA_PARTITIONS,
  );
}
