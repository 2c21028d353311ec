import { z } from "zod";
import { NodeUuid } from "../domain/node.js";
import { count } from "./fields.js";

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
  generation: count,
  traits: z.array(z.strictObject({ name: z.string(), owner: z.string() })),
});
export type NodeTraits = z.infer<typeof NodeTraits>;

/** POST /v1/nodes/{uuid}/traits/reset: the removals committed, and the orders forgotten per source. */
export const TraitsReset = z.strictObject({
  node: NodeUuid,
  generation: count,
  applied: z.array(z.string().regex(/^-/)),
  forgotten: z.record(z.string(), count),
});
export type TraitsReset = z.infer<typeof TraitsReset>;

/** POST /v1/inspector/webhook: applied, the additions and removals. */
export const TraitsApplied = z.strictObject({ node: NodeUuid, generation: count, applied: z.array(Change) });
export type TraitsApplied = z.infer<typeof TraitsApplied>;
