import { z } from "zod";
import { NodeUuid } from "../../domain/node.js";
import { ValidationError, parseOrThrow } from "../../domain/validation.js";
import { DeltaText, type TraitDelta } from "../../traits/delta.js";
import { SIGNATURE_WINDOW_S } from "../../inspection/signature.js";
import { InspectionData, finishOrder, inspectionTraits, type TraitRule } from "../../traits/inspection.js";
import { decodeObject, type Decoded } from "./result.js";

const Order = { sequence: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional() };
export const WebhookPayload = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("inspection"),
    node: NodeUuid,
    finished_at: z.iso.datetime({ offset: true, error: "must be an ISO 8601 time" }).optional(),
    ...Order,
    data: InspectionData,
  }),
  z.strictObject({
    kind: z.literal("deltas"),
    node: NodeUuid,
    ...Order,
    deltas: z.array(DeltaText).min(1, { error: "must hold at least one delta" }).max(100),
  }),
]);

/**
 * A webhook delivery, decoded: for an inspection result, the traits the rules find in it
 * (the data itself, up to a megabyte, never leaves the decoder); for explicit deltas,
 * the deltas. `order` is the sequence or the finish time in ms.
 */
export type WebhookRequest =
  | { kind: "inspection"; node: string; order: number; desired: string[] }
  | { kind: "deltas"; node: string; order: number | undefined; deltas: TraitDelta[] };

/**
 * The order a payload is applied in: its sequence, or its finish time in ms. The order
 * is remembered per node and source, and everything at or below it is refused as stale
 * from then on, so an order that cannot be meant is refused rather than remembered: both
 * kinds at once, or one ahead of the bridge's clock by more than the signature window
 * (300 s), read as ms since the epoch — a finish time in year 9999, a sequence that is a
 * time in µs, or the largest integer would each wedge the node for good. A counter (1, 2,
 * 3, ...) and a time in ms pass. (A node wedged by an order within the window, or by one
 * an older bridge took, is repaired with POST /v1/nodes/{uuid}/traits/reset.)
 */
function orderOf(
  payload: { finished_at?: string | undefined; sequence?: number | undefined },
  nowS: number,
): number | undefined {
  if (payload.sequence !== undefined && payload.finished_at !== undefined)
    throw new ValidationError([
      { field: "sequence", reason: "give finished_at or sequence, not both: they order differently" },
    ]);
  if (payload.sequence !== undefined) {
    if (payload.sequence > (nowS + SIGNATURE_WINDOW_S) * 1000)
      throw new ValidationError([
        {
          field: "sequence",
          reason:
            `is ahead of the bridge's clock read as ms since the epoch (${Math.floor(nowS * 1000)}) ` +
            `by more than ${SIGNATURE_WINDOW_S} s: use a counter or a time in ms`,
        },
      ]);
    return payload.sequence;
  }
  if (payload.finished_at === undefined) return undefined;
  return finishOrder(payload.finished_at, nowS, SIGNATURE_WINDOW_S);
}

export function decodeWebhook(text: string, rules: TraitRule[], nowS: number): Decoded<WebhookRequest> {
  return decodeObject(text, (body): WebhookRequest => {
    const payload = parseOrThrow(WebhookPayload, body);
    const order = orderOf(payload, nowS);
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
