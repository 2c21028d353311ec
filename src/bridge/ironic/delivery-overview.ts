import type { IronicDelivery } from "../../contracts/ironic.js";
import { fromStore } from "../../core/store-errors.js";
import type { IronicQueueDelivery } from "./delivery.js";

/**
 * GET /v1/ironic/delivery: `configured` false when the bridge has no Ironic to deliver to.
 * The queue's figures are the store's (every bridge on it answers the same); a store away
 * fails the read, as every store read does (503).
 */
export async function deliveryOverview(delivery: IronicQueueDelivery | undefined): Promise<IronicDelivery> {
  if (delivery === undefined) return { configured: false };
  const { durable, queue, layout, worker } = await fromStore(() => delivery.stats());
  return {
    configured: true,
    // true: the queue is in the store and outlives any bridge; false: in this process only.
    durable,
    pending_changes: queue.pendingChanges,
    oldest_pending_ms: queue.oldestPendingMs,
    // A batch: one commit's changes for one node (or, past the bound, a node's folded ones).
    batches: { delivered: queue.delivered, retried: queue.retried, given_up: queue.given_up },
    coalesced_changes: queue.coalesced,
    queue: {
      partitions: layout.partitions,
      partition_bound: layout.partitionBound,
      queued_batches: queue.queuedEntries,
      folded_nodes: queue.mergedNodes,
    },
    live_bridges: queue.liveWorkers,
    this_bridge: worker,
    undeliverable: queue.undeliverable.map(({ node, deltas, reason, atMs }) => ({
      node,
      changes: deltas,
      reason,
      at: new Date(atMs).toISOString(),
    })),
  };
}
