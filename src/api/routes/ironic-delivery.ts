import { DeclaredRoutes } from "../http/declared-routes.js";
import type { IronicQueueDelivery } from "../../bridge/ironic/delivery.js";
import { deliveryOverview } from "../../bridge/ironic/delivery-overview.js";
import { READ, type Operation } from "../openapi/operation.js";

/** GET /v1/ironic/delivery, as the document lists it. */
export const IRONIC_DELIVERY_OPERATIONS = {
  ironicDelivery: {
    method: "get",
    path: "/v1/ironic/delivery",
    id: "ironicDelivery",
    tag: "ironic",
    summary: "Trait changes on their way to Ironic",
    access: READ,
    answers: {
      200: { description: "pending changes, the oldest's wait, batches", schema: "IronicDelivery" },
    },
    store: false,
  },
} satisfies Record<string, Operation>;

/**
 * GET /v1/ironic/delivery: how trait changes stand on their way to Ironic (any role that
 * reads): `configured` false when the bridge has no Ironic to deliver to. The queue's
 * figures are the store's (every bridge on it answers the same); `this_bridge` is the
 * answering bridge's own part.
 */
export function ironicDeliveryRoutes(delivery: IronicQueueDelivery | undefined): DeclaredRoutes {
  const routes = new DeclaredRoutes();
  routes.serve(
    IRONIC_DELIVERY_OPERATIONS.ironicDelivery,
    async (_req, res) => void res.json(await deliveryOverview(delivery)),
  );
  return routes;
}
