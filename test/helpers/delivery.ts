import type { IronicDelivery } from "../../src/ironic/delivery.js";
import { IronicClient } from "../../src/ironic/client.js";

/** Resolve once the queue holds nothing for Ironic (delivered or given up), or fail after `timeoutMs`. */
export async function untilDrained(delivery: IronicDelivery, timeoutMs = 30_000): Promise<void> {
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
