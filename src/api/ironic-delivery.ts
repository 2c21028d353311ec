import { Router } from "express";
import type { IronicOutbox } from "../ironic/outbox.js";

/**
 * GET /v1/ironic/delivery: how trait changes stand on their way to Ironic (any role that
 * reads): `configured` false when the bridge has no Ironic to deliver to.
 */
export function ironicDeliveryRoutes(outbox: IronicOutbox | undefined): Router {
  const router = Router();
  router.get("/v1/ironic/delivery", (_req, res) => {
    if (outbox === undefined) return void res.json({ configured: false });
    const { pendingChanges, oldestPendingMs, delivered, retried, givenUp } = outbox.stats();
    res.json({
      configured: true,
      // In this process only: a bridge that dies loses what is pending (see IronicOutbox).
      durable: false,
      pending_changes: pendingChanges,
      oldest_pending_ms: oldestPendingMs,
      batches: { delivered, retried, given_up: givenUp },
    });
  });
  return router;
}
