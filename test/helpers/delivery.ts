import type { IronicQueueDelivery } from "../../src/bridge/ironic/delivery.js";
import { IronicClient } from "../../src/upstream/ironic-client.js";
import type { TraitCall } from "./ironic-peer.js";

/** Resolve once the queue holds nothing for Ironic (delivered or given up), or fail after `timeoutMs`. */
export async function untilDrained(delivery: IronicQueueDelivery, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const { queue } = await delivery.stats();
    if (queue.pendingChanges === 0) return;
    if (performance.now() > deadline)
      throw new Error(`${queue.pendingChanges} changes still pending for Ironic after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** GET /v1/ironic/delivery of a bridge over HTTP, until nothing is pending (or fail after `timeoutMs`). */
export async function untilBridgeDrained(
  url: string,
  token: string,
  timeoutMs: number,
): Promise<Record<string, any>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const answer = await fetch(`${url}/v1/ironic/delivery`, { headers: { authorization: `Bearer ${token}` } })
      .then((r) => r.json() as Promise<Record<string, any>>)
      .catch(() => null);
    if (answer !== null && answer.pending_changes === 0) return answer;
    if (performance.now() > deadline)
      throw new Error(`still pending for Ironic after ${timeoutMs} ms: ${JSON.stringify(answer)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A node's traits as Ironic has them, sorted. */
export async function ironicTraits(endpoint: string, node: string): Promise<string[]> {
  return (await new IronicClient(endpoint).traits(node)).sort();
}

/**
 * The changes of step `k` (1-based) of a node's sequence: step 1 adds CUSTOM_S1, each later
 * step removes the trait before it and adds its own. After step K the node has CUSTOM_SK
 * alone, and every call names its step: a reorder shows in Ironic's own log (see
 * callSteps), and in Ironic's end state when a step's add lands after the next's removal.
 */
export const stepDeltas = (k: number): string[] =>
  k === 1 ? ["+CUSTOM_S1"] : [`-CUSTOM_S${k - 1}`, `+CUSTOM_S${k}`];

/** The step each of a node's trait calls in Ironic's log belongs to, in the order Ironic answered them. */
export function callSteps(calls: TraitCall[], node: string): number[] {
  return calls
    .filter((c) => c.node === node && /^CUSTOM_S\d+$/.test(c.trait))
    .map((c) => Number(c.trait.slice("CUSTOM_S".length)) + (c.method === "DELETE" ? 1 : 0));
}

/**
 * Whether a node's calls went out step by step: the steps never go back. A change may be
 * sent again (at least once), but only before the next one starts: an owner moves on only
 * once Ironic answered, and a new owner starts from the oldest change still queued.
 */
export function stepsInOrder(steps: number[]): boolean {
  return steps.every((step, i) => i === 0 || step >= steps[i - 1]!);
}
