import { ValidationError, parseOrThrow } from "../../core/validation.js";
import { WebhookPayload } from "../../contracts/traits.js";
import type { TraitDelta } from "../../core/traits/delta.js";
import { SIGNATURE_WINDOW_S } from "../../contracts/webhook-signature.js";
import { webhookOrder, inspectionTraits, type TraitRule } from "../../bridge/inspection/trait-rules.js";
import { decodeObject, type Decoded } from "./result.js";

/**
 * A webhook delivery, decoded: for an inspection result, the traits the rules find in it
 * (the data itself, up to a megabyte, never leaves the decoder); for explicit deltas,
 * the deltas. `order` is the sequence or the finish time in ms.
 */
export type WebhookRequest =
  | { kind: "inspection"; node: string; order: number; desired: string[] }
  | { kind: "deltas"; node: string; order: number | undefined; deltas: TraitDelta[] };

export function decodeWebhook(text: string, rules: TraitRule[], nowS: number): Decoded<WebhookRequest> {
  return decodeObject(text, (body): WebhookRequest => {
    const payload = parseOrThrow(WebhookPayload, body);
    const order = webhookOrder(payload, nowS, SIGNATURE_WINDOW_S);
    if (payload.kind === "deltas")
      return { kind: "deltas", node: payload.node, order, deltas: payload.deltas };
    if (order === undefined)
      throw new ValidationError([
        { field: "finished_at", reason: "an inspection result needs finished_at or sequence" },
      ]);
    // Refused here, in the decoder, so thousands of traits never reach the event loop.
    const desired = inspectionTraits(payload.data, rules);
    return { kind: "inspection", node: payload.node, order, desired };
  });
}
