/** The most shards the metrics name one by one; past it, any other counts under "other". */
export const MAX_SHARD_LABELS = 2000;

/** The label of every shard the metrics do not name. */
export const OTHER_SHARDS = "other";

/**
 * Which shards the metrics name (a label value each) and which count under "other": a
 * shard the store knows — defined, carrying nodes, or with lease state — and only such.
 * The fenced endpoint takes a shard name from anyone who can reach it (its token is the
 * lease's, checked after), and a renew names whatever shard its body says: were each name
 * labelled as it came, made-up names would spend the budget, and real shards seen after
 * would count under "other" until a restart. The first MAX_SHARD_LABELS known shards are
 * named; a fleet with more counts the rest under "other", as a bound on the series kept.
 */
export class ShardLabels {
  private readonly labelled = new Set<string>();
  /** what the store listed at the last scrape (node counts, lease directory) */
  private listed: ReadonlySet<string> = new Set();

  constructor(
    /** whether a definition (a file, the store's) names the shard: read as each label is asked for */
    private readonly defined: (shard: string) => boolean,
    private readonly max = MAX_SHARD_LABELS,
  ) {}

  /** `shard`'s label when nothing more is known of it than its name (it may be made up). */
  of(shard: string): string {
    if (this.labelled.has(shard)) return shard;
    if (!this.defined(shard) && !this.listed.has(shard)) return OTHER_SHARDS;
    return this.take(shard);
  }

  /** `shard`'s label when the caller saw the store hold lease state for it (a grant, a live lease). */
  ofKnown(shard: string): string {
    return this.labelled.has(shard) ? shard : this.take(shard);
  }

  /** The shards the store lists now: each is named from its next count on. */
  storeLists(shards: Iterable<string>): void {
    this.listed = new Set(shards);
  }

  private take(shard: string): string {
    if (this.labelled.size >= this.max) return OTHER_SHARDS;
    this.labelled.add(shard);
    return shard;
  }
}
