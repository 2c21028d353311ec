import { Router } from "express";
import type { IronicQueueDelivery } from "../../ironic/delivery.js";
import { deliveryOverview } from "../../ironic/delivery-overview.js";

/**
 * GET /v1/ironic/delivery: how trait changes stand on their way to Ironic (any role that
 * reads): `configured` false when the bridge has no Ironic to deliver to. The queue's
 * figures are the store's (every bridge on it answers the same); `this_bridge` is the
 * answering bridge's own part.
 */
export function ironicDeliveryRoutes(delivery: IronicQueueDelivery | undefined): Router {
  const router = Router();
  router.get("/v1/ironic/delivery", async (_req, res) => void res.json(await deliveryOverview(delivery)));
  return router;
}
