import { z } from "zod";
import { NodeInput, NodeListQuery, NodePatch, NodeUuid, type BareMetalNode } from "../domain/node.js";
import { ValidationError, parseBoth, parseOrThrow } from "../domain/validation.js";
import { fromStore } from "../store/errors.js";
import {
  LIST_BUDGET,
  sameNode,
  type NodeBackend,
  type NodePage,
  type NodeSource,
  type PreviousPlace,
  type ShardCount,
} from "./port.js";

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

  /** Upsert nodes a caller validated already (a bulk's decoder): where each was, what moved. */
  async upsertValidated(
    nodes: BareMetalNode[],
  ): Promise<{ created: number; updated: number; moved: ShardMove[] }> {
    const previous = (await fromStore(() => this.backend.upsert(nodes)))!;
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

  /**
   * One page of GET /v1/nodes: `limit` nodes (fewer only at the end) after `marker`, in
   * uuid order, filled from as many bounded store calls as it takes.
   */
  async list(query: unknown): Promise<NodePage> {
    const filter = parseOrThrow(NodeListQuery, query ?? {});
    const source: NodeSource =
      filter.shard !== undefined
        ? { kind: "places", places: filter.shard }
        : filter.sharded === true
          ? { kind: "sharded" }
          : filter.sharded === false
            ? { kind: "places", places: [null] }
            : { kind: "all" };
    const nodes: BareMetalNode[] = [];
    let marker = filter.marker;
    while (nodes.length < filter.limit) {
      const page = await fromStore(() =>
        this.backend.list({
          source,
          limit: filter.limit - nodes.length,
          ...(marker !== undefined && { marker }),
        }),
      );
      nodes.push(...page.nodes.slice(0, filter.limit - nodes.length));
      if (page.next === null) return { nodes, next: null };
      marker = nodes.length === filter.limit ? nodes[nodes.length - 1]!.uuid : page.next;
    }
    return { nodes, next: nodes[nodes.length - 1]!.uuid };
  }

  /**
   * Every node of `source` in uuid order, a bounded page at a time: callers stream large
   * answers (a whole shard, nova's ring share) without holding the event loop.
   */
  async *pages(source: NodeSource, pageSize = 1000): AsyncGenerator<BareMetalNode[]> {
    let marker: string | undefined;
    for (;;) {
      const page = await fromStore(() =>
        this.backend.list({ source, limit: pageSize, ...(marker !== undefined && { marker }) }),
      );
      if (page.nodes.length > 0) yield page.nodes;
      if (page.next === null) return;
      marker = page.next;
    }
  }

  /** These nodes in the order given (null where gone), LIST_BUDGET at a time. */
  async getMany(uuids: readonly string[]): Promise<Array<BareMetalNode | null>> {
    const nodes: Array<BareMetalNode | null> = [];
    for (let i = 0; i < uuids.length; i += LIST_BUDGET)
      nodes.push(...(await fromStore(() => this.backend.getMany(uuids.slice(i, i + LIST_BUDGET)))));
    return nodes;
  }

  async counts(): Promise<ShardCount[]> {
    return fromStore(() => this.backend.counts());
  }

  /** See NodeBackend.poolVersion. */
  async poolVersion(): Promise<number> {
    return fromStore(() => this.backend.poolVersion());
  }
}
