import type { BareMetalNode } from "../domain/node.js";

/** Node count of one shard; `shard: null` is the unsharded pool. */
export interface ShardCount {
  shard: string | null;
  count: number;
}

export interface NodePage {
  nodes: BareMetalNode[];
  /** uuid to pass as `marker` for the next page, when there is one */
  next: string | null;
}

/** Where a node was before an upsert: nowhere (new), or its shard (null = unsharded). */
export type PreviousPlace = { created: true } | { created: false; shard: string | null };

/** Which nodes to list: by shard keys, or sharded / unsharded only, in uuid order. */
export interface NodeFilter {
  shards?: string[];
  sharded?: boolean;
  limit: number;
  marker?: string;
}

/**
 * Where nodes live. Every node is in exactly one place — one shard, or the unsharded
 * pool — and a change of shard moves it in one atomic step.
 */
export interface NodeBackend {
  /**
   * Insert or replace each node; answers, per node, where it was before. With `expected`
   * (one node only), only if the stored node still equals it — a compare-and-set for
   * read-modify-write changes — and null when it did not.
   */
  upsert(nodes: BareMetalNode[], expected?: BareMetalNode): Promise<PreviousPlace[] | null>;
  get(uuid: string): Promise<BareMetalNode | null>;
  /** answers whether there was such a node */
  delete(uuid: string): Promise<boolean>;
  list(filter: NodeFilter): Promise<NodePage>;
  /** every shard with at least one node, and the unsharded pool when not empty */
  counts(): Promise<ShardCount[]>;
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

/** One page of `uuids` (any order) after `marker`, in uuid order. */
export function pageOf(
  uuids: Iterable<string>,
  filter: NodeFilter,
): { uuids: string[]; next: string | null } {
  const sorted = [...uuids].sort();
  const start = filter.marker === undefined ? 0 : sorted.findIndex((u) => u > filter.marker!);
  if (start < 0) return { uuids: [], next: null };
  const slice = sorted.slice(start, start + filter.limit);
  const more = start + filter.limit < sorted.length;
  return { uuids: slice, next: more ? slice[slice.length - 1]! : null };
}
