import { Router } from "express";
import type { IronicDelivery } from "../ironic/delivery.js";
import { fromStore } from "../domain/store-errors.js";

/**
 * GET /v1/ironic/delivery: how trait changes stand on their way to Ironic (any role that
 * reads): `configured` false when the bridge has no Ironic to deliver to. The queue's
 * figures are the store's (every bridge on it answers the same); `this_bridge` is the
 * answering bridge's own part.
 */
export function ironicDeliveryRoutes(delivery: IronicDelivery | undefined): Router {
  const router = Router();
  router.get("/v1/ironic/delivery", async (_req, res) => {
    if (delivery === undefined) return void res.json({ configured: false });
    // The queue's figures are the store's: a store away answers 503, as every store read does.
    const { durable, queue, layout, worker } = await fromStore(() => delivery.stats());
    res.json({
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
    });
  });
  return router;
}
