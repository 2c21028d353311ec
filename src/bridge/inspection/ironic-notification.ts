import { z } from "zod";
import { NodeUuid } from "../../core/node.js";

/**
 * oslo.messaging's envelope for a notification (messagingv2): the message itself is a
 * JSON string inside it.
 */
const Envelope = z.object({ "oslo.version": z.string(), "oslo.message": z.string() });

/** What the bridge reads of an Ironic notification: the event and the node's state after it. */
const Notification = z.object({
  event_type: z.string(),
  payload: z.object({
    "ironic_object.data": z.object({
      uuid: NodeUuid,
      event: z.string().nullish(),
      previous_provision_state: z.string().nullish(),
      provision_state: z.string().nullish(),
      inspection_finished_at: z.string().nullish(),
    }),
  }),
});

/** A node's inspection that Ironic said has finished: which node, and when (Ironic's own time). */
export interface FinishedInspection {
  node: string;
  finishedAt: string;
}

/**
 * Whether a notification from Ironic's `ironic_versioned_notifications` topic says an
 * inspection finished: `baremetal.node.provision_set.end` with the event `done` out of
 * `inspecting` (Ironic has no `inspect.*` event; this is how the built-in inspection and
 * every inspect interface end one). Other notifications answer null; a body that is no
 * Ironic notification answers why. Ironic stamps `inspection_finished_at` (UTC, sometimes
 * without a zone) on the node as the inspection ends: that orders the result. Pure.
 */
export function finishedInspection(body: string): FinishedInspection | null | { unreadable: string } {
  let message: unknown;
  try {
    const outer: unknown = JSON.parse(body);
    const envelope = Envelope.safeParse(outer);
    message = envelope.success ? JSON.parse(envelope.data["oslo.message"]) : outer;
  } catch (error) {
    return { unreadable: `not JSON: ${(error as Error).message}` };
  }
  const parsed = Notification.safeParse(message);
  if (!parsed.success) {
    const type = (message as { event_type?: unknown } | null)?.event_type;
    // Only a node's provision notification must have the node's fields; others are not ours.
    return typeof type === "string" && type.startsWith("baremetal.node.provision_set.")
      ? { unreadable: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") }
      : null;
  }
  const { event_type, payload } = parsed.data;
  const node = payload["ironic_object.data"];
  if (event_type !== "baremetal.node.provision_set.end" || node.event !== "done") return null;
  if (node.previous_provision_state !== "inspecting") return null;
  if (node.inspection_finished_at == null)
    return { unreadable: `node ${node.uuid}: no inspection_finished_at` };
  return { node: node.uuid, finishedAt: asUtc(node.inspection_finished_at) };
}

/** Ironic writes its times in UTC; a time without a zone is given one. */
function asUtc(time: string): string {
  return /(Z|[+-]\d\d:?\d\d)$/.test(time) ? time : `${time}Z`;
}
