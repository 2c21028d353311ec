import type { BareMetalNode } from "../domain/node.js";
import {
  pageOf,
  sameNode,
  type NodeBackend,
  type NodeFilter,
  type NodePage,
  type PreviousPlace,
  type ShardCount,
} from "./port.js";

/** The embedded node registry: nodes by uuid, and an index of uuids per place. */
export class MemoryNodes implements NodeBackend {
  private readonly byUuid = new Map<string, BareMetalNode>();
  /** shard name, or null for the unsharded pool -> uuids */
  private readonly byPlace = new Map<string | null, Set<string>>();

  private place(shard: string | null): Set<string> {
    let members = this.byPlace.get(shard);
    if (members === undefined) this.byPlace.set(shard, (members = new Set()));
    return members;
  }

  private unplace(node: BareMetalNode): void {
    const members = this.byPlace.get(node.shard);
    members?.delete(node.uuid);
    if (members?.size === 0) this.byPlace.delete(node.shard);
  }

  async upsert(nodes: BareMetalNode[], expected?: BareMetalNode): Promise<PreviousPlace[] | null> {
    if (expected !== undefined) {
      const stored = this.byUuid.get(expected.uuid);
      if (stored === undefined || !sameNode(stored, expected)) return null;
    }
    return nodes.map((node) => {
      const old = this.byUuid.get(node.uuid);
      if (old !== undefined) this.unplace(old);
      this.place(node.shard).add(node.uuid);
      this.byUuid.set(node.uuid, { ...node });
      return old === undefined ? { created: true } : { created: false, shard: old.shard };
    });
  }

  async get(uuid: string): Promise<BareMetalNode | null> {
    const node = this.byUuid.get(uuid);
    return node === undefined ? null : { ...node };
  }

  async delete(uuid: string): Promise<boolean> {
    const node = this.byUuid.get(uuid);
    if (node === undefined) return false;
    this.unplace(node);
    this.byUuid.delete(uuid);
    return true;
  }

  async list(filter: NodeFilter): Promise<NodePage> {
    let candidates: Iterable<string>;
    if (filter.shards !== undefined) {
      candidates = filter.shards.flatMap((shard) => [...(this.byPlace.get(shard) ?? [])]);
    } else if (filter.sharded === false) {
      candidates = this.byPlace.get(null) ?? [];
    } else if (filter.sharded === true) {
      candidates = [...this.byPlace].flatMap(([shard, members]) => (shard === null ? [] : [...members]));
    } else {
      candidates = this.byUuid.keys();
    }
    const page = pageOf(new Set(candidates), filter);
    return { nodes: page.uuids.map((uuid) => ({ ...this.byUuid.get(uuid)! })), next: page.next };
  }

  async counts(): Promise<ShardCount[]> {
    return [...this.byPlace].map(([shard, members]) => ({ shard, count: members.size }));
  }

  /** How many nodes (for tests proving a refusal stored nothing). */
  size(): number {
    return this.byUuid.size;
  }
}
