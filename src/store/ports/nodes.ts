import type { BareMetalNode } from "../../core/node.js";

/** Node count of one shard; `shard: null` is the unsharded pool. */
export interface ShardCount {
  shard: string | null;
  count: number;
}

export interface NodePage {
  nodes: BareMetalNode[];
  /**
   * uuid to pass as `marker` for the next page, when there may be more. A page may hold
   * fewer nodes than asked for, even none, with `next` still set: each call examines a
   * bounded number of entries (LIST_BUDGET), so no listing holds the store for long.
   */
  next: string | null;
  /** the versions of the source's `versionsOf` places, read in the same step as the page */
  versions?: number[];
}

/** Where a node was before an upsert: nowhere (new), or its shard (null = unsharded). */
export type PreviousPlace = { created: true } | { created: false; shard: string | null };

/**
 * Which nodes a listing walks, each kept as an index in the store so a listing costs
 * O(the page), never O(the registry):
 * - `places`: the nodes of these shards (null: the unsharded pool);
 * - `instance`: unsharded nodes whose instance is on `host` (compared lower-cased, as nova does),
 *   and with `versionsOf`, those places' versions (see placeVersions) read in one atomic
 *   step with each page: a listing kept for one of them is then no older than the page;
 * - `free`: unsharded nodes without an instance, what nova's ring spreads;
 * - `sharded`: nodes with any shard; `all`: every node.
 */
export type NodeSource =
  | { kind: "places"; places: Array<string | null> }
  | { kind: "instance"; host: string; versionsOf?: ReadonlyArray<string | null> }
  | { kind: "free" }
  | { kind: "sharded" }
  | { kind: "all" };

export interface NodeQuery {
  source: NodeSource;
  limit: number;
  /** start after this uuid */
  marker?: string;
}

/** Entries one listing call may examine at most (Redis runs it as one script). */
export const LIST_BUDGET = 20_000;

/** How many nodes each of `places` places may contribute to a page of `limit` within the budget. */
export function perPlaceLimit(limit: number, places: number): number {
  return Math.max(1, Math.min(limit, Math.floor(LIST_BUDGET / Math.max(1, places))));
}

/**
 * Where nodes live. Every node is in exactly one place — one shard, or the unsharded
 * pool — and a change of shard moves it in one atomic step, together with every index.
 */
export interface NodeBackend {
  /**
   * Nodes a streamed listing asks for per call: what one call costs decides it. The
   * embedded store answers on the event loop, so its pages are small enough to leave the
   * loop within a slice; Redis answers after a round trip, which a small page multiplies.
   */
  readonly listPage: number;
  /**
   * Insert or replace each node; answers, per node, where it was before. With `expected`
   * (one node only), only if the stored node still equals it — a compare-and-set for
   * read-modify-write changes — and null when it did not.
   */
  upsert(nodes: BareMetalNode[], expected?: BareMetalNode): Promise<PreviousPlace[] | null>;
  get(uuid: string): Promise<BareMetalNode | null>;
  /** these nodes, in the order given (null for one that is not there); at most LIST_BUDGET */
  getMany(uuids: readonly string[]): Promise<Array<BareMetalNode | null>>;
  /** answers whether there was such a node */
  delete(uuid: string): Promise<boolean>;
  /** one page of `query.source` in uuid order */
  list(query: NodeQuery): Promise<NodePage>;
  /** every shard with at least one node, and the unsharded pool when not empty */
  counts(): Promise<ShardCount[]>;
  /** how many nodes carry `shard` as their shard key (0: none) */
  countOf(shard: string): Promise<number>;
  /**
   * A number that changes whenever the unsharded pool or an unsharded node's instance
   * host changes: what nova's ring places is then due to be placed again.
   */
  poolVersion(): Promise<number>;
  /**
   * Per place (shard, or null for the unsharded pool), a number that changes whenever
   * any node in it, or entering or leaving it, changes: a listing of the place may be
   * kept as long as its version stays.
   */
  placeVersions(places: ReadonlyArray<string | null>): Promise<number[]>;
  /**
   * The registry's mark: a random id the first upsert into an empty registry leaves; null
   * before. A registry that lost its data (a Redis restarted without persistence) has lost
   * its mark too, and its next upsert leaves a new one: a bridge that finds another mark
   * than before, or none, knows the nodes it read are gone. Reading it writes nothing.
   */
  mark(): Promise<string | null>;
}

/** Whether two nodes hold the same values. */
export function sameNode(a: BareMetalNode, b: BareMetalNode): boolean {
  return (
    a.uuid === b.uuid &&
    a.name === b.name &&
    a.shard === b.shard &&
    a.conductor_group === b.conductor_group &&
    a.instance_host === b.instance_host
  );
}
