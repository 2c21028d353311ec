import { z } from "zod";
import {
  BulkNodesRequest,
  NodeInput,
  NodeListQuery,
  NodePatch,
  NodeUuid,
  type BareMetalNode,
} from "../domain/node.js";
import { ValidationError, parseBoth, parseOrThrow } from "../domain/validation.js";
import { fromStore } from "../store/errors.js";
import { sameNode, type NodeBackend, type NodePage, type PreviousPlace, type ShardCount } from "./port.js";

const UuidPath = z.strictObject({ uuid: NodeUuid });
/** A PATCH that keeps losing its compare-and-set means heavy contention on one node. */
const MAX_PATCH_ATTEMPTS = 8;

/** A node that changed shard and now lives in `to`. */
export interface ShardMove {
  uuid: string;
  to: string;
}

/** The nodes that an upsert moved into a (different) shard. */
function movesInto(nodes: BareMetalNode[], previous: PreviousPlace[]): ShardMove[] {
  return nodes.flatMap((node, i) => {
    const before = previous[i]!;
    return !before.created && node.shard !== null && before.shard !== node.shard
      ? [{ uuid: node.uuid, to: node.shard }]
      : [];
  });
}

/**
 * The node registry every caller uses: validates each request (a ValidationError names
 * every bad field before anything is written) and hands canonical nodes to a backend.
 */
export class NodeRegistry {
  constructor(readonly backend: NodeBackend) {}

  /** Create or replace one node: `body` is the whole node (see NodeInput). */
  async put(
    uuid: string,
    body: unknown,
  ): Promise<{ node: BareMetalNode; created: boolean; moved: ShardMove[] }> {
    const [path, input] = parseBoth([UuidPath, { uuid }], [NodeInput, body]);
    if (input.uuid !== undefined && input.uuid !== path.uuid) {
      throw new ValidationError([
        { field: "uuid", reason: `must match the uuid in the path (${path.uuid})` },
      ]);
    }
    const node: BareMetalNode = { ...input, uuid: path.uuid };
    const previous = (await fromStore(() => this.backend.upsert([node])))!;
    return { node, created: previous[0]!.created, moved: movesInto([node], previous) };
  }

  /**
   * Change some fields of an existing node (JSON merge patch); null when there is no such
   * node. Read, merged and written back under a compare-and-set, so a concurrent change of
   * the same node is never overwritten with stale fields.
   */
  async patch(uuid: string, body: unknown): Promise<{ node: BareMetalNode; moved: ShardMove[] } | null> {
    const [path, patch] = parseBoth([UuidPath, { uuid }], [NodePatch, body]);
    for (let attempt = 0; attempt < MAX_PATCH_ATTEMPTS; attempt++) {
      const current = await fromStore(() => this.backend.get(path.uuid));
      if (current === null) return null;
      const node: BareMetalNode = { ...current };
      for (const [field, value] of Object.entries(patch))
        if (value !== undefined) Object.assign(node, { [field]: value });
      // Nothing changes: nothing is written.
      if (sameNode(node, current)) return { node, moved: [] };
      const previous = await fromStore(() => this.backend.upsert([node], current));
      if (previous !== null) return { node, moved: movesInto([node], previous) };
    }
    throw new Error(`node ${path.uuid}: ${MAX_PATCH_ATTEMPTS} concurrent changes in a row, gave up`);
  }

  /** Upsert many whole nodes in one request: all are validated before any is written. */
  async bulk(body: unknown): Promise<{ created: number; updated: number; moved: ShardMove[] }> {
    const { nodes } = parseOrThrow(BulkNodesRequest, body);
    const previous = (await fromStore(() => this.backend.upsert(nodes.map((n) => ({ ...n })))))!;
    const fresh = previous.filter((p) => p.created).length;
    return { created: fresh, updated: previous.length - fresh, moved: movesInto(nodes, previous) };
  }

  async get(uuid: string): Promise<BareMetalNode | null> {
    const input = parseOrThrow(UuidPath, { uuid });
    return fromStore(() => this.backend.get(input.uuid));
  }

  async delete(uuid: string): Promise<boolean> {
    const input = parseOrThrow(UuidPath, { uuid });
    return fromStore(() => this.backend.delete(input.uuid));
  }

  async list(query: unknown): Promise<NodePage> {
    const filter = parseOrThrow(NodeListQuery, query ?? {});
    return fromStore(() =>
      this.backend.list({
        limit: filter.limit,
        ...(filter.shard !== undefined && { shards: filter.shard }),
        ...(filter.sharded !== undefined && { sharded: filter.sharded }),
        ...(filter.marker !== undefined && { marker: filter.marker }),
      }),
    );
  }

  /** Every node of the given shards (an agent's work list), in uuid order. */
  async ofShards(shards: string[]): Promise<BareMetalNode[]> {
    if (shards.length === 0) return [];
    return (await fromStore(() => this.backend.list({ shards, limit: Number.MAX_SAFE_INTEGER }))).nodes;
  }

  /** Every unsharded node (the legacy ring's share), in uuid order. */
  async unsharded(): Promise<BareMetalNode[]> {
    return (await fromStore(() => this.backend.list({ sharded: false, limit: Number.MAX_SAFE_INTEGER })))
      .nodes;
  }

  async counts(): Promise<ShardCount[]> {
    return fromStore(() => this.backend.counts());
  }
}
