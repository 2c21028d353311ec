import { logger } from "../log.js";
import type { TraitDelta } from "../traits/delta.js";
import type { IronicClient } from "./client.js";
import { applyToIronic } from "./sink.js";

/**
 * Hands applied trait deltas to Ironic in the background, one node at a time and in
 * order per node, retrying a failed batch with backoff. It lives in this process: a
 * bridge that dies with batches queued loses them (the next inspection of the node
 * brings Ironic back in line); a durable outbox is future work.
 */
export class IronicOutbox {
  private readonly chains = new Map<string, Promise<void>>();

  constructor(
    private readonly ironic: IronicClient,
    private readonly retries = 5,
    private readonly backoffMs = 500,
  ) {}

  push(node: string, deltas: TraitDelta[]): void {
    if (deltas.length === 0) return;
    const previous = this.chains.get(node) ?? Promise.resolve();
    const next = previous.then(() => this.deliver(node, deltas));
    this.chains.set(node, next);
    void next.finally(() => {
      if (this.chains.get(node) === next) this.chains.delete(node);
    });
  }

  private async deliver(node: string, deltas: TraitDelta[]): Promise<void> {
    for (let attempt = 1; attempt <= this.retries; attempt++) {
      try {
        const result = await applyToIronic(this.ironic, node, deltas);
        logger.info("ironic-traits", { node, ...result });
        return;
      } catch (error) {
        logger.warn("ironic-traits-error", { node, attempt, error: String(error) });
        if (attempt < this.retries)
          await new Promise((r) => setTimeout(r, this.backoffMs * 2 ** (attempt - 1)));
      }
    }
    logger.error("ironic-traits-gave-up", { node, deltas: deltas.map((d) => `${d.sign}${d.trait}`) });
  }

  /** Resolves when everything queued so far has been delivered (or given up). */
  async idle(): Promise<void> {
    while (this.chains.size > 0) await Promise.all([...this.chains.values()]);
  }
}
