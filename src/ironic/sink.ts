import type { TraitDelta } from "../traits/delta.js";
import type { IronicClient } from "./client.js";

export interface SinkResult {
  added: number;
  removed: number;
  /** removals of traits Ironic did not have (404), counted as done */
  absent: number;
}

/**
 * Apply one node's deltas to Ironic with single-trait calls, in order. Each call is
 * idempotent (PUT adds or keeps, DELETE removes or finds it absent), so a retried batch
 * converges; the whole list is never replaced.
 */
export async function applyToIronic(
  ironic: IronicClient,
  node: string,
  deltas: TraitDelta[],
): Promise<SinkResult> {
  const result: SinkResult = { added: 0, removed: 0, absent: 0 };
  for (const { sign, trait } of deltas) {
    if (sign === "+") {
      await ironic.addTrait(node, trait);
      result.added++;
    } else if ((await ironic.removeTrait(node, trait)) === "removed") result.removed++;
    else result.absent++;
  }
  return result;
}
