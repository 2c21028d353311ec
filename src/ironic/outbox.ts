import { logger } from "../log.js";
import type { TraitDelta } from "../traits/delta.js";
import type { IronicClient } from "./client.js";
import { applyToIronic } from "./sink.js";

/** How delivery to Ironic stands: what waits, since when, and what became of the rest. */
export interface OutboxStats {
  /** trait changes handed over and not yet in Ironic (nor given up) */
  pendingChanges: number;
  /** how long the oldest of them has waited, ms (0: none waits): the delivery lag */
  oldestPendingMs: number;
  /** batches (one node's changes from one commit) delivered, retried, given up, since start */
  delivered: number;
  retried: number;
  givenUp: number;
}

/** One batch handed over: when, and how many changes. */
interface Batch {
  at: number;
  changes: number;
}

/**
 * Hands applied trait deltas to Ironic in the background, one node at a time and in
 * order per node, retrying a failed batch with backoff. It lives in this process: a
 * bridge that dies with batches queued loses them (the next inspection of the node
 * brings Ironic back in line); a durable outbox is future work.
 */
export class IronicOutbox {
  private readonly chains = new Map<string, Promise<void>>();
  /** batches not yet settled, oldest first (a Set keeps insertion order) */
  private readonly waiting = new Set<Batch>();
  private pendingChanges = 0;
  private readonly counts = { delivered: 0, retried: 0, givenUp: 0 };
  /** told how long each delivered batch waited, ms (the metrics' lag histogram) */
  onDelivered: (waitedMs: number) => void = () => undefined;

  constructor(
    private readonly ironic: IronicClient,
    private readonly retries = 5,
    private readonly backoffMs = 500,
  ) {}

  push(node: string, deltas: TraitDelta[]): void {
    if (deltas.length === 0) return;
    const batch = { at: performance.now(), changes: deltas.length };
    this.waiting.add(batch);
    this.pendingChanges += batch.changes;
    const previous = this.chains.get(node) ?? Promise.resolve();
    const next = previous.then(() => this.deliver(node, deltas, batch));
    this.chains.set(node, next);
    void next.finally(() => {
      if (this.chains.get(node) === next) this.chains.delete(node);
    });
  }

  private async deliver(node: string, deltas: TraitDelta[], batch: Batch): Promise<void> {
    for (let attempt = 1; attempt <= this.retries; attempt++) {
      try {
        const result = await applyToIronic(this.ironic, node, deltas);
        logger.info("ironic-traits", { node, ...result });
        this.counts.delivered += 1;
        this.settle(batch);
        this.onDelivered(performance.now() - batch.at);
        return;
      } catch (error) {
        logger.warn("ironic-traits-error", { node, attempt, error: String(error) });
        if (attempt < this.retries) {
          this.counts.retried += 1;
          await new Promise((r) => setTimeout(r, this.backoffMs * 2 ** (attempt - 1)));
        }
      }
    }
    this.counts.givenUp += 1;
    this.settle(batch);
    logger.error("ironic-traits-gave-up", { node, deltas: deltas.map((d) => `${d.sign}${d.trait}`) });
  }

  private settle(batch: Batch): void {
    this.waiting.delete(batch);
    this.pendingChanges -= batch.changes;
  }

  stats(now = performance.now()): OutboxStats {
    const oldest = this.waiting.values().next();
    return {
      pendingChanges: this.pendingChanges,
      oldestPendingMs: oldest.done === true ? 0 : Math.round(now - oldest.value.at),
      ...this.counts,
    };
  }

  /** Resolves when everything queued so far has been delivered (or given up). */
  async idle(): Promise<void> {
    while (this.chains.size > 0) await Promise.all([...this.chains.values()]);
  }
}
