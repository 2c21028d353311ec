import { z } from "zod";
import { LEASE_TTL_DEFAULT_MS, LeaseTtlMs } from "../core/lease/bounds.js";
import { AgentId, ShardName, noCaseTwins } from "../core/names.js";
import { uniqueField } from "../core/validation.js";
import { wholeNumber } from "./fields.js";
import { Lease } from "./leases.js";

/** Where a shard's definition comes from: a file of this bridge, or the store (every bridge's). */
const Source = z.enum(["file", "store"]);

/** One row of GET /v1/shards. */
export const ShardSummary = z.strictObject({
  // "None": the unsharded pool, as Ironic names it
  name: z.union([ShardName, z.literal("None")]),
  count: wholeNumber,
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
  count: wholeNumber,
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
export const ShardDefinitionWritten = ShardDefinition.extend({ takes_effect_within_ms: wholeNumber });
export type ShardDefinitionWritten = z.infer<typeof ShardDefinitionWritten>;

/** GET /v1/shard-definitions: every definition (files' and the store's) and the store's version of them. */
export const ShardDefinitionList = z.strictObject({
  version: wholeNumber,
  refresh_ms: wholeNumber,
  definitions: z.array(ShardDefinition),
});
export type ShardDefinitionList = z.infer<typeof ShardDefinitionList>;

// --- what is written ---------------------------------------------------------------

/**
 * The most agents a definition written now may allow (one active, the rest standbys):
 * a longer list is refused in one step, not agent by agent. A file or a stored definition
 * of an older bridge with more is still read — refusing it would open its shard to any
 * agent — so the bound is on what is written (ShardDefinitionBody, a migration's plan).
 */
export const MAX_SHARD_AGENTS = 100;

/** `agents` bounded as a definition written now is (the API's body, a migration's plan). */
export const boundShardAgents = (agents: z.ZodArray<typeof AgentId>) =>
  agents.max(MAX_SHARD_AGENTS, { error: `must name at most ${MAX_SHARD_AGENTS} agents` });

const ShardAgents = z.array(AgentId).min(1, { error: "must name at least one agent, or be left out" });
/** An agent named twice, or two equal but for case (one host to nova), is refused (last: after the list's other checks). */
const uniqueAgents = (payload: z.core.ParsePayload<string[]>): void => {
  uniqueField("agents", null, (agent: string) => agent)(payload);
  noCaseTwins("agents", null, (agent: string) => agent)(payload);
};

/**
 * One file in shards/ (`NAME.json`), or one definition kept in the store (written through
 * the API, whose body is ShardDefinitionBody): what a bridge reads, defaults filled in.
 */
export const ShardDefinitionFile = z.strictObject({
  name: ShardName,
  description: z
    .string({ error: "must be a string" })
    .max(1000, { error: "must be at most 1000 characters" })
    .default(""),
  lease_ttl_ms: LeaseTtlMs.default(LEASE_TTL_DEFAULT_MS),
  /** agents allowed to serve the shard (one active, the rest its standbys); absent = any agent */
  agents: ShardAgents.check(uniqueAgents).optional(),
  /**
   * The shard is being filled with nodes from nova's ring (`migrate apply` sets it before
   * it writes shard keys and clears it once every node has its key): until then a lease
   * on it, or a heartbeat declaring it, does not take the agent out of the legacy pool,
   * so the agent keeps listing the nodes that have no key yet. See src/core/ring/membership.ts.
   */
  filling: z.boolean({ error: "must be true or false" }).optional(),
});
export type ShardDefinitionFile = z.output<typeof ShardDefinitionFile>;

/** PUT /v1/shard-definitions/{shard}'s body: a file's fields but the name (the path's). */
export const ShardDefinitionBody = ShardDefinitionFile.omit({ name: true }).extend({
  agents: boundShardAgents(ShardAgents).check(uniqueAgents).optional(),
});

/**
 * A bridge's backup of the store's shard definitions (serve --definitions-backup): what it
 * last read, every shard's last write, removals included (`record` null), so that a store
 * that lost them is given them back (src/bridge/shards/definitions-backup.ts). `record` is the
 * stored body as the bridge that wrote it sent it: kept as it is, read by the bridges.
 */
export const DefinitionsBackupFile = z.strictObject({
  format: z.literal("shardbridge.definitions-backup.v1"),
  /** the store it was read from (no password), and when */
  store: z.string(),
  saved_at: z.string(),
  /** the store's mark and version when read (src/store/ports/definitions.ts) */
  mark: z.string().nullable(),
  version: z.int().min(-1),
  definitions: z.record(
    ShardName,
    z.strictObject({ version: z.int().min(0), record: z.record(z.string(), z.unknown()).nullable() }),
  ),
});
export type DefinitionsBackupFile = z.infer<typeof DefinitionsBackupFile>;
