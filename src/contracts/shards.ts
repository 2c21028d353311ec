import { z } from "zod";
import { AgentId, ShardName } from "../domain/names.js";
import { count } from "./fields.js";
import { Lease } from "./leases.js";

/** Where a shard's definition comes from: a file of this bridge, or the store (every bridge's). */
const Source = z.enum(["file", "store"]);

/** One row of GET /v1/shards. */
export const ShardSummary = z.strictObject({
  // "None": the unsharded pool, as Ironic names it
  name: z.union([ShardName, z.literal("None")]),
  count,
  description: z.string(),
  lease: Lease.nullable(),
  /** how long the oldest change its holder has not acknowledged has waited (0: none; null: the unsharded pool) */
  feed_lag_ms: z.number().min(0).nullable(),
});
export type ShardSummary = z.infer<typeof ShardSummary>;

/** GET /v1/shards. */
export const ShardList = z.strictObject({ shards: z.array(ShardSummary) });
export type ShardList = z.infer<typeof ShardList>;

/** GET /v1/shards/{shard}: a shard as an agent needs it before serving it. */
export const Shard = z.strictObject({
  name: ShardName,
  defined: z.boolean(),
  description: z.string(),
  lease_ttl_ms: z.int().min(1),
  /** who may serve it; null: any agent */
  agents: z.array(AgentId).nullable(),
  defined_by: Source.nullable(),
  filling: z.boolean(),
  count,
  lease: Lease.nullable(),
  /** the fenced Ironic endpoint's path with "{token}" for the token, or null */
  ironic_endpoint: z.string().nullable(),
});
export type Shard = z.infer<typeof Shard>;

/** A shard definition as the API shows it (src/api/routes/shard-definitions.ts). */
export const ShardDefinition = z.strictObject({
  name: ShardName,
  description: z.string(),
  lease_ttl_ms: z.int().min(1000),
  agents: z.array(AgentId).nullable(),
  filling: z.boolean(),
  source: Source,
});
export type ShardDefinition = z.infer<typeof ShardDefinition>;

/** PUT /v1/shard-definitions/{shard}: the definition, and how soon every bridge uses it. */
export const ShardDefinitionWritten = ShardDefinition.extend({ takes_effect_within_ms: count });
export type ShardDefinitionWritten = z.infer<typeof ShardDefinitionWritten>;

/** GET /v1/shard-definitions: every definition (files' and the store's) and the store's version of them. */
export const ShardDefinitionList = z.strictObject({
  version: count,
  refresh_ms: count,
  definitions: z.array(ShardDefinition),
});
export type ShardDefinitionList = z.infer<typeof ShardDefinitionList>;
