import { NodeInput, NodeListQuery, NodePatch, NodePath, type BareMetalNode } from "../core/node.js";
import { ValidationError, parseBoth, parseOrThrow } from "../core/validation.js";
import { fromStore } from "../core/store-errors.js";
import {
  LIST_BUDGET,
  sameNode,
  type NodeBackend,
  type NodePage,
  type NodeSource,
  type PreviousPlace,
  type ShardCount,
} from "./ports/nodes.js";

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
  /**
   * Told after each upsert that went through: a new registry's first one leaves its mark
   * (NodeBackend.mark), which whoever watches for a lost registry reads at once.
   */
  onUpsert: () => void = () => undefined;

  constructor(readonly backend: NodeBackend) {}

  /** Create or replace one node: `body` is the whole node (see NodeInput). */
  async put(
    uuid: string,
    body: unknown,
  ): Promise<{ node: BareMetalNode; created: boolean; moved: ShardMove[] }> {
    const [path, input] = parseBoth([NodePath, { uuid }], [NodeInput, body]);
    if (input.uuid !== undefined && input.uuid !== path.uuid) {
      throw new ValidationError([
        { field: "uuid", reason: `must match the uuid in the path (${path.uuid})` },
      ]);
    }
    const node: BareMetalNode = { ...input, uuid: path.uuid };
    const previous = (await fromStore(() => this.backend.upsert([node])))!;
    this.onUpsert();
    return { node, created: previous[0]!.created, moved: movesInto([node], previous) };
  }

  /**
   * Change some fields of an existing node (JSON merge patch); null when there is no such
   * node. Read, merged and written back under a compare-and-set, so a concurrent change of
   * the same node is never overwritten with stale fields.
   */
  async patch(uuid: string, body: unknown): Promise<{ node: BareMetalNode; moved: ShardMove[] } | null> {
    const [path, patch] = parseBoth([NodePath, { uuid }], [NodePatch, body]);
    for (let attempt = 0; attempt < MAX_PATCH_ATTEMPTS; attempt++) {
      const current = await fromStore(() => this.backend.get(path.uuid));
      if (current === null) return null;
      const node: BareMetalNode = { ...current };
      for (const [field, value] of Object.entries(patch))
        if (value !== undefined) Object.assign(node, { [field]: value });
      // Nothing changes: nothing is written.
      if (sameNode(node, current)) return { node, moved: [] };
      const previous = await fromStore(() => this.backend.upsert([node], current));
      if (previous === null) continue;
      this.onUpsert();
      return { node, moved: movesInto([node], previous) };
    }
    throw new Error(`node ${path.uuid}: ${MAX_PATCH_ATTEMPTS} concurrent changes in a row, gave up`);
  }

  /** Upsert nodes a caller validated already (a bulk's decoder): where each was, what moved. */
  async upsertValidated(
    nodes: BareMetalNode[],
  ): Promise<{ created: number; updated: number; moved: ShardMove[] }> {
    const previous = (await fromStore(() => this.backend.upsert(nodes)))!;
    this.onUpsert();
    const fresh = previous.filter((p) => p.created).length;
    return { created: fresh, updated: previous.length - fresh, moved: movesInto(nodes, previous) };
  }

  async get(uuid: string): Promise<BareMetalNode | null> {
    const input = parseOrThrow(NodePath, { uuid });
    return fromStore(() => this.backend.get(input.uuid));
  }

  async delete(uuid: string): Promise<boolean> {
    const input = parseOrThrow(NodePath, { uuid });
    return fromStore(() => this.backend.delete(input.uuid));
  }

  /**
   * One page of GET /v1/nodes: `limit` nodes (fewer only at the end) after `marker`, in
   * uuid order. The query is checked at once (a ValidationError, before anything is
   * read); the nodes then come the backend's listPage at a time, so a page of 10,000 nodes is never
   * decoded in one go, and `next()` — the marker for the page after — is known once the
   * last of them is out.
   */
  openList(query: unknown): { nodes: AsyncIterable<BareMetalNode[]>; next(): string | null } {
    const filter = parseOrThrow(NodeListQuery, query ?? {});
    const source: NodeSource =
      filter.shard !== undefined
        ? { kind: "places", places: filter.shard }
        : filter.sharded === true
          ? { kind: "sharded" }
          : filter.sharded === false
            ? { kind: "places", places: [null] }
            : { kind: "all" };
    const cursor: ListCursor = { next: null };
    return { nodes: listPages(this.backend, source, filter, cursor), next: () => cursor.next };
  }

  /** `openList`, gathered: the whole page at once (tests, small pages). */
  async list(query: unknown): Promise<NodePage> {
    const listing = this.openList(query);
    const nodes: BareMetalNode[] = [];
    for await (const page of listing.nodes) nodes.push(...page);
    return { nodes, next: listing.next() };
  }

  /**
   * Every node of `source` in uuid order, a bounded page at a time: callers stream large
   * answers (a whole shard, nova's ring share) without holding the event loop.
   */
  async *pages(
    source: NodeSource,
    pageSize = this.backend.listPage,
    first?: Promise<NodePage>,
  ): AsyncGenerator<BareMetalNode[]> {
    let marker: string | undefined;
    for (;;) {
      const page =
        first !== undefined && marker === undefined
          ? await first
          : await fromStore(() =>
              this.backend.list({ source, limit: pageSize, ...(marker !== undefined && { marker }) }),
            );
      if (page.nodes.length > 0) yield page.nodes;
      if (page.next === null) return;
      marker = page.next;
    }
  }

  /**
   * The unsharded nodes whose instance is on `host`, page by page, the first asked for
   * now; and, in `first`, the versions of `places` (see placeVersions) read in one atomic
   * step with that first page, and whether that page was the whole listing. A caller that
   * answers a place from a listing kept under its version knows the listing is no older
   * than the page: a node that left the host's instances for one of those places is in
   * the page, or in the place at that version, never in neither. A failed first read
   * surfaces where the pages are read, and in `first`.
   */
  instanceNodes(
    host: string,
    places: ReadonlyArray<string | null>,
  ): { pages: AsyncIterable<BareMetalNode[]>; first: Promise<{ versions: number[]; whole: boolean }> } {
    const source: NodeSource = { kind: "instance", host, versionsOf: places };
    const pageSize = this.backend.listPage;
    const first = fromStore(() => this.backend.list({ source, limit: pageSize }));
    first.catch(() => undefined); // read by whoever consumes it
    return {
      pages: this.pages({ kind: "instance", host }, pageSize, first),
      first: first.then((page) => ({ versions: page.versions ?? [], whole: page.next === null })),
    };
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

  /** See NodeBackend.countOf. */
  async countOf(shard: string): Promise<number> {
    return fromStore(() => this.backend.countOf(shard));
  }

  /** See NodeBackend.placeVersions. */
  async placeVersions(places: ReadonlyArray<string | null>): Promise<number[]> {
    return fromStore(() => this.backend.placeVersions(places));
  }

  /** See NodeBackend.poolVersion. */
  async poolVersion(): Promise<number> {
    return fromStore(() => this.backend.poolVersion());
  }
}

/** Where a listing stands: the marker after its last node, once its limit is reached. */
interface ListCursor {
  next: string | null;
}

/**
 * The pages of NodeRegistry.openList: `filter.limit` nodes at most, `cursor.next` set once
 * the limit is reached. Declared once, here: a generator function made per call (a closure)
 * gives the generator objects of each call a hidden class of their own (docs/ARCHITECTURE.md,
 * One event loop).
 */
async function* listPages(
  backend: NodeBackend,
  source: NodeSource,
  filter: { limit: number; marker?: string | undefined },
  cursor: ListCursor,
): AsyncGenerator<BareMetalNode[]> {
  let marker = filter.marker;
  let sent = 0;
  while (sent < filter.limit) {
    const page = await fromStore(() =>
      backend.list({
        source,
        limit: Math.min(filter.limit - sent, backend.listPage),
        ...(marker !== undefined && { marker }),
      }),
    );
    const taken = page.nodes.slice(0, filter.limit - sent);
    sent += taken.length;
    if (taken.length > 0) yield taken;
    // Nodes left in this page are the next page's first: continue after the last taken.
    if (taken.length < page.nodes.length) marker = taken[taken.length - 1]!.uuid;
    else if (page.next === null) return;
    else marker = page.next;
    if (sent === filter.limit) cursor.next = marker;
  }
}
