import type { NodeRegistry, ShardMove } from "../store/node-registry.js";
import { fromStore } from "../core/store-errors.js";
import {
  applyDeltas,
  deltasToward,
  formatDelta,
  type DeltaProblem,
  type TraitDelta,
} from "../core/traits/delta.js";
import type { OwnershipRegistry } from "../core/traits/ownership.js";
import type { FeedEntry, TraitBackend, TraitRecord } from "../store/ports/traits.js";

/** The source name inspection results are applied as. */
export const INSPECTOR = "inspector";

export type TraitOutcome =
  | { kind: "applied"; node: string; generation: number; applied: string[] }
  | { kind: "unknown_node"; node: string }
  | { kind: "stale"; node: string; order: number; lastOrder: number }
  | { kind: "refused"; node: string; problems: DeltaProblem[] }
  /** the delivery was seen before: its first answer, as remembered (see DeliveryMemory) */
  | { kind: "replayed"; node: string; answer: string };

/**
 * What an operator's reset of a node came to: the removals it committed (every trait the
 * node held, when its traits were reset) and the orders it forgot, per source.
 */
export type ResetOutcome =
  | { kind: "reset"; node: string; generation: number; applied: string[]; forgotten: Record<string, number> }
  | { kind: "unknown_node"; node: string };

/** What a change came to when it was not a replay: what a delivery remembers. */
export type FinalOutcome = Exclude<TraitOutcome, { kind: "replayed" }>;

/**
 * A webhook delivery to remember with its outcome once it was applied: the answer (made
 * by the caller from the outcome) is stored with the commit itself, or on its own when
 * there was nothing to commit. A refusal (an unknown node, a stale order, a change refused)
 * is not remembered: it changed nothing, so a copy sent again can apply nothing twice; it
 * is judged again, as any new delivery would be, and a refusal writes nothing (a flood of
 * refused signed deliveries would otherwise leave a memo each for a day). A delivery
 * already remembered is not applied again: the
 * change answers "replayed" with the first answer, looked up in the same round trip to
 * the store as the node and its traits (and again on each retry of a lost
 * compare-and-set, so a duplicate sent concurrently gets the first one's answer too).
 */
export interface DeliveryMemory {
  id: string;
  ttlSeconds: number;
  answerOf(outcome: FinalOutcome): string;
}

/** A shard's current traits, for an agent whose feed cursor fell behind what the feed keeps. */
export interface FeedResync {
  reason: string;
  /** acknowledge this id once the snapshot is applied; null: the feed is empty */
  resume_after: string | null;
  nodes: Array<{ node: string; traits: string[]; generation: number }>;
}

/** What the active agent reads from its shard's feed. */
export interface FeedAnswer {
  cursor: string | null;
  entries: FeedEntry[];
  resync?: FeedResync;
}

/** Trait records read per round trip when nodes that moved shards are snapshotted. */
const SNAPSHOT_READ_PAGE = 1000;

/** A CAS that keeps losing means heavy contention on one node; give up and say so. */
const MAX_ATTEMPTS = 8;

/**
 * Applies trait changes to nodes: an inspection result (turned into deltas by the trait
 * rules) or explicit deltas, from one source, whole or not at all, never older than what
 * that source already applied for the node.
 */
export class TraitService {
  constructor(
    private readonly backend: TraitBackend,
    private readonly nodes: NodeRegistry,
    private readonly ownership: OwnershipRegistry,
    /**
     * `toIronic`: queue every committed change for Ironic, in the commit's own atomic step
     * (the bridge delivers to an Ironic); `onApplied`: told of every committed change
     */
    {
      toIronic = false,
      onApplied = () => undefined,
    }: { toIronic?: boolean; onApplied?: (node: string, deltas: TraitDelta[]) => void } = {},
  ) {
    this.toIronic = toIronic;
    this.onApplied = onApplied;
  }

  private readonly toIronic: boolean;
  private readonly onApplied: (node: string, deltas: TraitDelta[]) => void;

  /**
   * An inspection result for `node`, as the traits the rules found in it (`desired`),
   * ordered by `order` (its finish time in ms, or a sequence).
   */
  applyInspection(
    node: string,
    order: number,
    desired: readonly string[],
    delivery?: DeliveryMemory,
  ): Promise<TraitOutcome> {
    return this.change(
      node,
      INSPECTOR,
      order,
      (record) => deltasToward(record, desired, INSPECTOR, this.ownership),
      delivery,
    );
  }

  /** Explicit deltas from `source`; `order` optional (unordered deltas are applied as they come). */
  applyExplicit(
    node: string,
    source: string,
    order: number | undefined,
    deltas: TraitDelta[],
    delivery?: DeliveryMemory,
  ): Promise<TraitOutcome> {
    return this.change(node, source, order, () => deltas, delivery);
  }

  /**
   * An operator's repair of a node: forget the order each source last applied (`order`),
   * so that source's next result applies whatever its order; and/or remove every trait
   * the node holds, whoever holds it (`traits`), as one commit that reaches the shard's
   * feed and Ironic like any other. Ownership does not apply: only an admin may ask.
   */
  async reset(node: string, what: { order: boolean; traits: boolean }): Promise<ResetOutcome> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [known, record] = await Promise.all([
        this.nodes.get(node),
        fromStore(() => this.backend.read(node)),
      ]);
      if (known === null) return { kind: "unknown_node", node };
      const removed: TraitDelta[] = what.traits
        ? Object.keys(record.holders)
            .sort()
            .map((trait) => ({ sign: "-", trait }))
        : [];
      const forgotten = what.order ? record.lastOrder : {};
      if (removed.length === 0 && Object.keys(forgotten).length === 0)
        return { kind: "reset", node, generation: record.generation, applied: [], forgotten };
      const next: TraitRecord = {
        holders: what.traits ? {} : record.holders,
        generation: record.generation + 1,
        lastOrder: what.order ? {} : record.lastOrder,
      };
      const applied = removed.map(formatDelta);
      const change = { node, deltas: applied, generation: next.generation };
      const feed =
        known.shard !== null && applied.length > 0 ? { shard: known.shard, entry: change } : undefined;
      const ironic = this.toIronic && applied.length > 0 ? change : undefined;
      if (await fromStore(() => this.backend.commit(node, record.generation, next, { feed, ironic }))) {
        if (removed.length > 0) this.onApplied(node, removed);
        return { kind: "reset", node, generation: next.generation, applied, forgotten };
      }
    }
    throw new Error(`traits of node ${node}: ${MAX_ATTEMPTS} concurrent changes in a row, gave up`);
  }

  /**
   * Nodes that moved into a shard: deliver each one's whole trait set to the new shard's
   * feed, so its active agent starts from the full picture rather than later deltas.
   */
  async snapshotMoves(moves: ShardMove[]): Promise<void> {
    for (let i = 0; i < moves.length; i += SNAPSHOT_READ_PAGE) {
      const page = moves.slice(i, i + SNAPSHOT_READ_PAGE);
      const records = await fromStore(() => this.backend.readMany(page.map((m) => m.uuid)));
      for (const [j, { uuid, to }] of page.entries()) {
        const record = records[j]!;
        const traits = Object.keys(record.holders).sort();
        if (traits.length === 0) continue;
        const entry = {
          node: uuid,
          deltas: traits.map((t) => `+${t}`),
          generation: record.generation,
          snapshot: true as const,
        };
        await fromStore(() => this.backend.appendFeed(to, entry));
      }
    }
  }

  /**
   * `shard`'s feed after its cursor. When entries after the cursor were trimmed away (an
   * agent away for more than the feed keeps), no silent gap: the answer is a resync
   * instead — every node of the shard with its current traits, and the entry to resume
   * after. The newest entry is read before the traits, so a change committed in between
   * comes again after it; deltas are idempotent, so applying it twice is harmless.
   */
  async readFeed(shard: string, limit: number): Promise<FeedAnswer> {
    const read = await fromStore(() => this.backend.readFeed(shard, limit));
    if (!read.trimmedPastCursor) return { cursor: read.cursor, entries: read.entries };
    const nodes: FeedResync["nodes"] = [];
    // A page of the shard's nodes at a time, its records in one round trip each.
    for await (const page of this.nodes.pages({ kind: "places", places: [shard] })) {
      const records = await fromStore(() => this.backend.readMany(page.map((n) => n.uuid)));
      page.forEach(({ uuid }, i) =>
        nodes.push({
          node: uuid,
          traits: Object.keys(records[i]!.holders).sort(),
          generation: records[i]!.generation,
        }),
      );
    }
    return {
      cursor: read.cursor,
      entries: [],
      resync: {
        reason: "entries after the cursor were trimmed from the feed",
        resume_after: read.newest,
        nodes,
      },
    };
  }

  ack(shard: string, id: string): Promise<string | null> {
    return fromStore(() => this.backend.ack(shard, id));
  }

  delivery(id: string): Promise<string | null> {
    return fromStore(() => this.backend.delivery(id));
  }

  recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    return fromStore(() => this.backend.recordDelivery(id, outcome, ttlSeconds));
  }

  async traitsOf(node: string): Promise<TraitRecord | null> {
    if ((await this.nodes.get(node)) === null) return null;
    return fromStore(() => this.backend.read(node));
  }

  private async change(
    node: string,
    source: string,
    order: number | undefined,
    deltasFor: (record: TraitRecord) => TraitDelta[],
    delivery?: DeliveryMemory,
  ): Promise<TraitOutcome> {
    // The outcome when nothing is committed: applied (nothing to change), remembered on its
    // own; a refusal, not remembered (see DeliveryMemory).
    const settle = async (outcome: FinalOutcome): Promise<TraitOutcome> => {
      if (delivery !== undefined && outcome.kind === "applied")
        await this.recordDelivery(delivery.id, delivery.answerOf(outcome), delivery.ttlSeconds);
      return outcome;
    };
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // Read together: one round trip to the store, not three.
      const [known, record, seen] = await Promise.all([
        this.nodes.get(node),
        fromStore(() => this.backend.read(node)),
        delivery === undefined ? null : this.delivery(delivery.id),
      ]);
      if (seen !== null) return { kind: "replayed", node, answer: seen };
      if (known === null) return settle({ kind: "unknown_node", node });
      const lastOrder = record.lastOrder[source];
      if (order !== undefined && lastOrder !== undefined && order <= lastOrder) {
        return settle({ kind: "stale", node, order, lastOrder });
      }
      const result = applyDeltas(record, deltasFor(record), source, this.ownership);
      if (!result.ok) return settle({ kind: "refused", node, problems: result.problems });
      // Spelled out, not spread: a literal that starts with a spread and adds fields gives
      // every record a hidden class of its own (docs/ARCHITECTURE.md, One event loop).
      const next: TraitRecord = {
        holders: result.state.holders,
        generation: record.generation + 1,
        lastOrder:
          order === undefined ? record.lastOrder : Object.assign({}, record.lastOrder, { [source]: order }),
      };
      if (result.applied.length === 0 && order === undefined) {
        return settle({ kind: "applied", node, generation: record.generation, applied: [] });
      }
      // The active agent of the node's shard learns of the change from the shard's feed,
      // appended in the same atomic step as the change itself; so is the delivery's answer.
      const applied = result.applied.map(formatDelta);
      const outcome: TraitOutcome = { kind: "applied", node, generation: next.generation, applied };
      const feed =
        known.shard !== null && applied.length > 0
          ? { shard: known.shard, entry: { node, deltas: applied, generation: next.generation } }
          : undefined;
      const remembered =
        delivery === undefined
          ? undefined
          : { id: delivery.id, answer: delivery.answerOf(outcome), ttlSeconds: delivery.ttlSeconds };
      const ironic =
        this.toIronic && applied.length > 0
          ? { node, deltas: applied, generation: next.generation }
          : undefined;
      if (
        await fromStore(() =>
          this.backend.commit(node, record.generation, next, { feed, delivery: remembered, ironic }),
        )
      ) {
        this.onApplied(node, result.applied);
        return outcome;
      }
    }
    throw new Error(`traits of node ${node}: ${MAX_ATTEMPTS} concurrent changes in a row, gave up`);
  }
}
