import { z } from "zod";
import { NodeUuid } from "../core/node.js";
import { TraitName } from "../core/traits/names.js";
import { wholeNumber } from "./fields.js";

/** A trait change as the bridge applied it: `+NAME` added, `-NAME` removed. */
const Change = z.string().regex(/^[+-]/);

/** POST /v1/nodes/{uuid}/traits/reset: what an operator resets of a node. */
export const TraitResetBody = z
  .strictObject({
    order: z.boolean().default(false).describe("forget the order each source last applied"),
    traits: z.boolean().default(false).describe("remove every trait the node holds, whoever holds it"),
  })
  .refine((body) => body.order || body.traits, {
    error: "ask for order, traits or both (true): nothing to reset",
    path: ["order"],
  });

/** GET /v1/nodes/{uuid}/traits: the traits and who holds each. */
export const NodeTraits = z.strictObject({
  node: NodeUuid,
  generation: wholeNumber,
  traits: z.array(z.strictObject({ name: z.string(), owner: z.string() })),
});
export type NodeTraits = z.infer<typeof NodeTraits>;

/** POST /v1/nodes/{uuid}/traits/reset: the removals committed, and the orders forgotten per source. */
export const TraitsReset = z.strictObject({
  node: NodeUuid,
  generation: wholeNumber,
  applied: z.array(z.string().regex(/^-/)),
  forgotten: z.record(z.string(), wholeNumber),
});
export type TraitsReset = z.infer<typeof TraitsReset>;

/** POST /v1/inspector/webhook: applied, the additions and removals. */
export const TraitsApplied = z.strictObject({
  node: NodeUuid,
  generation: wholeNumber,
  applied: z.array(Change),
});
export type TraitsApplied = z.infer<typeof TraitsApplied>;

/**
 * The parts of an inspection result (Ironic's inventory plus `pci_devices`) that trait
 * rules read. Other fields are allowed and ignored: inventories carry much more.
 */
export const InspectionData = z.object({
  inventory: z.object({
    cpu: z
      .object({
        architecture: z.string().optional(),
        flags: z.array(z.string()).default([]),
        count: z.number().int().nonnegative().optional(),
      })
      .optional(),
    boot: z.object({ current_boot_mode: z.string().optional() }).optional(),
    system_vendor: z
      .object({ manufacturer: z.string().optional(), product_name: z.string().optional() })
      .optional(),
    // The agent reports each NIC's PCI vendor as "0x8086"; nulls and odd values occur on
    // virtual NICs and are passed over by the rules rather than refused.
    interfaces: z.array(z.object({ vendor: z.string().nullable().optional() })).default([]),
  }),
  pci_devices: z
    .array(
      z.object({
        vendor_id: z.string().regex(/^[0-9a-fA-F]{4}$/, { error: "must be 4 hex digits, no 0x" }),
        product_id: z.string().regex(/^[0-9a-fA-F]{4}$/, { error: "must be 4 hex digits, no 0x" }),
        class: z.string().optional(),
      }),
    )
    .default([]),
});
export type InspectionData = z.output<typeof InspectionData>;

/** "+CUSTOM_A" / "-CUSTOM_B" as the inspector sends them. */
export const DeltaText = z
  .string({ error: "must be a string" })
  .regex(/^[+-]/, { error: 'must start with "+" (add) or "-" (remove)' })
  .transform((text) => ({ sign: text[0] as "+" | "-", trait: text.slice(1) }))
  .pipe(z.object({ sign: z.enum(["+", "-"]), trait: TraitName }));

const Order = { sequence: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional() };

/** POST /v1/inspector/webhook: an inspection result, or explicit deltas, for one node. */
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
