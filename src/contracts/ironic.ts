import { z } from "zod";
import { wholeNumber, time } from "./fields.js";

/** A bridge's delivery counts (the queue's and this bridge's own). */
const Batches = { delivered: wholeNumber, retried: wholeNumber, given_up: wholeNumber };

/** GET /v1/ironic/delivery: how trait changes stand on their way to Ironic. */
export const IronicDelivery = z.discriminatedUnion("configured", [
  z.strictObject({ configured: z.literal(false) }),
  z.strictObject({
    configured: z.literal(true),
    durable: z.boolean(),
    pending_changes: wholeNumber,
    oldest_pending_ms: z.number().min(0),
    batches: z.strictObject(Batches),
    coalesced_changes: wholeNumber,
    queue: z.strictObject({
      partitions: wholeNumber,
      partition_bound: wholeNumber,
      queued_batches: wholeNumber,
      folded_nodes: wholeNumber,
    }),
    live_bridges: wholeNumber,
    this_bridge: z.strictObject({
      worker: z.string(),
      partitions: z.array(wholeNumber),
      ...Batches,
      calls_in_flight: wholeNumber,
      calls_allowed: wholeNumber,
    }),
    undeliverable: z.array(
      z.strictObject({ node: z.string(), changes: z.array(z.string()), reason: z.string(), at: time }),
    ),
  }),
]);
export type IronicDelivery = z.infer<typeof IronicDelivery>;

/** Ironic's own error body, as the fenced endpoint passes it on (`error_message`: JSON as a string). */
export const IronicErrorBody = z.object({ error_message: z.string() });
export type IronicErrorBody = z.infer<typeof IronicErrorBody>;
