import { randomUUID } from "node:crypto";
import { nodeRecord, type BareMetalNode } from "../../core/node.js";
import { hostKey } from "../../core/names.js";
import { OrderedSet } from "./ordered-set.js";
import {
  perPlaceLimit,
  sameNode,
  type NodeBackend,
  type NodePage,
  type NodeQuery,
  type PreviousPlace,
  type ShardCount,
} from "../ports/nodes.js";

/** A page of one ordered index: up to `limit` after `marker`, and whether more follow. */
function pageOfIndex(
  index: OrderedSet | undefined,
  limit: number,
  marker?: string,
): { uuids: string[]; next: string | null } {
  const uuids = index?.after(marker, limit + 1) ?? [];
  if (uuids.length <= limit) return { uuids, next: null };
  uuids.length = limit;
  return { uuids, next: uuids[limit - 1]! };
}

/**
 * Which of the place indexes a node sits in: its shard's, or the unsharded pool's under
 * its instance host's key ("" for none). Two nodes with the same place sit in the same
 * indexes: a renamed node moves nowhere.
 */
const placeOf = (node: BareMetalNode): string =>
  node.shard !== null
    ? `s:${node.shard}`
    : `u:${node.instance_host === null ? "" : hostKey(node.instance_host)}`;

/**
 * The embedded node registry: nodes by uuid, and ordered indexes of uuids by place, by
 * instance host and for nova's ring, kept in step on every change.
 */
export class MemoryNodes implements NodeBackend {
  /**
   * A node costs about 4 µs of the event loop to read and serialise here, so 250 take
   * about a millisecond and a stream's LoopSlicer hands the loop back within a few; pages
   * of 1,000 (4 ms each) held it 10-15 ms at a time (measured, a page of 10,000 nodes).
   */
  readonly listPage = 250;
  private readonly byUuid = new Map<string, BareMetalNode>();
  private readonly all = new OrderedSet();
  private readonly sharded = new OrderedSet();
  /** shard name, or null for the unsharded pool -> its uuids */
  private readonly places = new Map<string | null, OrderedSet>();
  /** lower-cased instance host -> unsharded nodes with an instance on it */
  private readonly hosts = new Map<string, OrderedSet>();
  /** unsharded nodes without an instance */
  private readonly free = new OrderedSet();
  private version = 0;
  private readonly versions = new Map<string | null, number>();

  private touch(place: string | null): void {
    this.versions.set(place, (this.versions.get(place) ?? 0) + 1);
  }

  private index<K>(map: Map<K, OrderedSet>, key: K): OrderedSet {
    let set = map.get(key);
    if (set === undefined) map.set(key, (set = new OrderedSet()));
    return set;
  }

  private drop<K>(map: Map<K, OrderedSet>, key: K, uuid: string): void {
    const set = map.get(key);
    if (set !== undefined && set.delete(uuid) && set.size === 0) map.delete(key);
  }

  /** Take `node` out of every index it is in. */
  private unindex(node: BareMetalNode): void {
    this.all.delete(node.uuid);
    this.drop(this.places, node.shard, node.uuid);
    if (node.shard !== null) this.sharded.delete(node.uuid);
    else if (node.instance_host !== null) this.drop(this.hosts, hostKey(node.instance_host), node.uuid);
    else this.free.delete(node.uuid);
  }

  private indexNode(node: BareMetalNode): void {
    this.all.add(node.uuid);
    this.index(this.places, node.shard).add(node.uuid);
    if (node.shard !== null) this.sharded.add(node.uuid);
    else if (node.instance_host !== null) this.index(this.hosts, hostKey(node.instance_host)).add(node.uuid);
    else this.free.add(node.uuid);
  }

  /** Whether a change from `old` to `next` changes what nova's ring must place. */
  private touchesPool(old: BareMetalNode | undefined, next: BareMetalNode | undefined): boolean {
    const pool = (n: BareMetalNode | undefined) => (n === undefined || n.shard !== null ? "" : placeOf(n));
    return pool(old) !== pool(next);
  }

  async upsert(nodes: BareMetalNode[], expected?: BareMetalNode): Promise<PreviousPlace[] | null> {
    if (expected !== undefined) {
      const stored = this.byUuid.get(expected.uuid);
      if (stored === undefined || !sameNode(stored, expected)) return null;
    }
    this.ownMark ??= randomUUID();
    return nodes.map((node) => {
      const old = this.byUuid.get(node.uuid);
      // A node sent again as it is (a sync sends the whole fleet each time) changes
      // nothing: no version, no index, no new object for the GC to copy and promote.
      if (old !== undefined && sameNode(old, node)) return { created: false, shard: old.shard };
      if (this.touchesPool(old, node)) this.version++;
      this.touch(node.shard);
      if (old !== undefined) this.touch(old.shard);
      if (old === undefined || placeOf(old) !== placeOf(node)) {
        if (old !== undefined) this.unindex(old);
        this.indexNode(node);
      }
      // Kept frozen and handed out as is: no copy per node listed. One literal for every
      // node (nodeRecord), never a spread: see there.
      this.byUuid.set(node.uuid, Object.freeze(nodeRecord(node)));
      return old === undefined ? { created: true } : { created: false, shard: old.shard };
    });
  }

  async get(uuid: string): Promise<BareMetalNode | null> {
    return this.byUuid.get(uuid) ?? null;
  }

  async getMany(uuids: readonly string[]): Promise<Array<BareMetalNode | null>> {
    return uuids.map((uuid) => this.byUuid.get(uuid) ?? null);
  }

  async delete(uuid: string): Promise<boolean> {
    const node = this.byUuid.get(uuid);
    if (node === undefined) return false;
    if (this.touchesPool(node, undefined)) this.version++;
    this.touch(node.shard);
    this.unindex(node);
    this.byUuid.delete(uuid);
    return true;
  }

  async list({ source, limit, marker }: NodeQuery): Promise<NodePage> {
    let page: { uuids: string[]; next: string | null };
    switch (source.kind) {
      case "all":
        page = pageOfIndex(this.all, limit, marker);
        break;
      case "sharded":
        page = pageOfIndex(this.sharded, limit, marker);
        break;
      case "free":
        page = pageOfIndex(this.free, limit, marker);
        break;
      case "instance":
        page = pageOfIndex(this.hosts.get(hostKey(source.host)), limit, marker);
        // In the same step as the page, as the Redis script reads them; `versions` first,
        // as a spread followed by a field gives each page a hidden class of its own
        // (docs/ARCHITECTURE.md, One event loop).
        if (source.versionsOf !== undefined)
          return { versions: this.versionsOf(source.versionsOf), ...this.nodesOf(page) };
        break;
      case "places":
        page = this.mergedPage(source.places, limit, marker);
        break;
    }
    return this.nodesOf(page);
  }

  private nodesOf(page: { uuids: string[]; next: string | null }): NodePage {
    return { nodes: page.uuids.map((uuid) => this.byUuid.get(uuid)!), next: page.next };
  }

  private versionsOf(places: ReadonlyArray<string | null>): number[] {
    return places.map((place) => this.versions.get(place) ?? 0);
  }

  /** A page over several places, as the Redis script pages them (see perPlaceLimit). */
  private mergedPage(places: Array<string | null>, limit: number, marker?: string) {
    const each = perPlaceLimit(limit, places.length);
    let full = false;
    const merged: string[] = [];
    for (const place of new Set(places)) {
      const uuids = this.places.get(place)?.after(marker, each) ?? [];
      if (uuids.length === each) full = true;
      merged.push(...uuids);
    }
    merged.sort();
    const more = full || merged.length > each;
    const uuids = merged.slice(0, each);
    return { uuids, next: more && uuids.length > 0 ? uuids[uuids.length - 1]! : null };
  }

  async counts(): Promise<ShardCount[]> {
    return [...this.places].map(([shard, members]) => ({ shard, count: members.size }));
  }

  async countOf(shard: string): Promise<number> {
    return this.places.get(shard)?.size ?? 0;
  }

  async poolVersion(): Promise<number> {
    return this.version;
  }

  async placeVersions(places: ReadonlyArray<string | null>): Promise<number[]> {
    return this.versionsOf(places);
  }

  /** left by the first upsert (see NodeBackend.mark): new with every process, as the store */
  private ownMark: string | null = null;

  async mark(): Promise<string | null> {
    return this.ownMark;
  }

  /** How many nodes (for tests proving a refusal stored nothing). */
  size(): number {
    return this.byUuid.size;
  }
}
