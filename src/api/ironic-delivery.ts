import { Router } from "express";
import type { IronicOutbox } from "../ironic/outbox.js";
import { deliveryOverview } from "./overview.js";

/**
 * GET /v1/ironic/delivery: how trait changes stand on their way to Ironic (any role that
 * reads): `configured` false when the bridge has no Ironic to deliver to.
 */
export function ironicDeliveryRoutes(outbox: IronicOutbox | undefined): Router {
  const router = Router();
  router.get("/v1/ironic/delivery", (_req, res) => void res.json(deliveryOverview(outbox)));
  return router;
}
