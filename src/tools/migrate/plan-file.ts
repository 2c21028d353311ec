import { readFileSync } from "node:fs";
import { z } from "zod";
import { LeaseTtlMs } from "../../core/lease/bounds.js";
import { AgentId, ShardName, novaHostFor, shardKey } from "../../core/names.js";
import { NodeUuid } from "../../core/node.js";
import { RingKindName, RingMembers } from "../../core/ring/kinds.js";
import { ValidationError, parseOrThrow } from "../../core/validation.js";
import { ConfigError } from "../../runtime/config.js";
import { boundShardAgents } from "../../contracts/shards.js";
import {
  inventoryEntry,
  inventoryFingerprint,
  novaSide,
  type InventoryEntry,
  type MigrationPlan,
  type PlanNode,
} from "../../core/ring/plan.js";
import { count } from "../../runtime/text/count.js";

/** What a plan file says it is; a later format gets a new name. */
export const PLAN_FORMAT = "shardbridge.migration-plan/1";

const InventoryEntrySchema = z.strictObject({
  uuid: NodeUuid,
  shard: ShardName.nullable(),
  instance_host: AgentId.nullable(),
  has_instance: z.boolean({ error: "must be true or false" }),
});

/** A shard definition the plan creates (the store's, see src/bridge/shards/catalog.ts). */
const PlannedDefinition = z.strictObject({
  name: ShardName,
  description: z
    .string({ error: "must be a string" })
    .max(1000, { error: "must be at most 1000 characters" }),
  lease_ttl_ms: LeaseTtlMs,
  // Bounded as the API bounds a definition, so a plan that could not be applied is refused
  // before apply writes anything.
  agents: boundShardAgents(z.array(AgentId).min(1, { error: "must name at least one agent" })),
});

const Count = z.number({ error: "must be a number" }).int({ error: "must be an integer" }).min(0);

/**
 * PLAN.json, as `migrate plan --out` writes it and `migrate apply` / `verify` read it:
 * what it was computed from (the inventory, its fingerprint and nova's ring), which node
 * goes to which shard under which agent, the shard definitions to create, and nova's
 * side. An operator may edit the definitions (TTL, description, more agents) before
 * applying; the inventory and its fingerprint are checked against each other.
 */
export const PlanFile = z.strictObject({
  format: z.literal(PLAN_FORMAT, { error: `must be "${PLAN_FORMAT}"` }),
  created_at: z.string({ error: "must be a string" }),
  inventory: z.strictObject({
    source: z.enum(["bridge", "ironic"], { error: "must be bridge or ironic" }),
    from: z.string({ error: "must be a string" }),
    ring: RingKindName,
    members: RingMembers,
    fingerprint: z.string().regex(/^sha256:[0-9a-f]{64}$/, { error: "must be sha256:<64 hex digits>" }),
    nodes: z.array(InventoryEntrySchema),
  }),
  max_per_shard: Count,
  shards: z.array(
    z.strictObject({
      name: ShardName,
      active: AgentId,
      nodes: z.array(NodeUuid).min(1, { error: "must hold at least one node" }),
    }),
  ),
  definitions: z.array(PlannedDefinition),
  already_sharded: Count,
  unplaced: z.array(z.strictObject({ uuid: NodeUuid, reason: z.string() })),
  nova: z.strictObject({
    services: z.array(z.strictObject({ shard: ShardName, agent: AgentId, host: AgentId })),
    old_services: z.array(AgentId),
    moves: z.array(z.strictObject({ uuid: NodeUuid, from: AgentId, to: AgentId })),
  }),
});
export type PlanFile = z.output<typeof PlanFile>;

/** The plan file for `plan`, computed from `nodes` over the ring `members` of `kind`. */
export function planFile(
  plan: MigrationPlan,
  nodes: readonly PlanNode[],
  inventory: { source: "bridge" | "ironic"; from: string; ring: "tooz" | "ketama"; members: string[] },
  options: { maxPerShard: number; leaseTtlMs: number; now?: Date },
): PlanFile {
  const entries = nodes.map(inventoryEntry).sort((a, b) => (a.uuid < b.uuid ? -1 : 1));
  const nova = novaSide(
    plan,
    inventory.members,
    new Map(nodes.map((n) => [n.uuid, n.instance_host])),
    novaHostFor,
  );
  return {
    format: PLAN_FORMAT,
    created_at: (options.now ?? new Date()).toISOString(),
    inventory: {
      ...inventory,
      fingerprint: inventoryFingerprint(entries, { kind: inventory.ring, members: inventory.members }),
      nodes: entries,
    },
    max_per_shard: options.maxPerShard,
    shards: plan.shards,
    definitions: plan.shards.map((s) => ({
      name: s.name,
      description: `planned by shardbridge migrate from nova's ring: ${count(s.nodes.length, "node")} of ${s.active}`,
      lease_ttl_ms: options.leaseTtlMs,
      agents: [s.active],
    })),
    already_sharded: plan.alreadySharded,
    unplaced: plan.unplaced,
    nova: { services: nova.services, old_services: nova.oldServices, moves: nova.moves },
  };
}

/**
 * What a plan promises beyond its fields' shapes, each broken promise named by its field:
 * the inventory is the one its fingerprint names (the file was not edited there), every
 * planned node is an unsharded node of it and in one shard only, shard names are new and
 * unique, and each shard has one definition that lets its planned agent serve it.
 */
function planIssues(plan: PlanFile): Array<{ field: string; reason: string }> {
  const issues: Array<{ field: string; reason: string }> = [];
  const { inventory } = plan;
  const fingerprint = inventoryFingerprint(inventory.nodes, {
    kind: inventory.ring,
    members: inventory.members,
  });
  if (fingerprint !== inventory.fingerprint)
    issues.push({
      field: "inventory.fingerprint",
      reason: `does not match inventory.nodes and the ring (${fingerprint}): the inventory was edited; plan again`,
    });
  const byUuid = new Map<string, InventoryEntry>();
  inventory.nodes.forEach((e, i) => {
    if (byUuid.has(e.uuid)) issues.push({ field: `inventory.nodes[${i}].uuid`, reason: `repeats ${e.uuid}` });
    byUuid.set(e.uuid, e);
  });
  // Names by shardKey: equal but for case, two names are one shard to nova and Ironic.
  const taken = new Map(
    inventory.nodes.flatMap((e) => (e.shard === null ? [] : [[shardKey(e.shard), e.shard] as const])),
  );
  const placed = new Map<string, string>();
  const names = new Map<string, string>();
  plan.shards.forEach((shard, i) => {
    const key = shardKey(shard.name);
    if (names.has(key)) issues.push({ field: `shards[${i}].name`, reason: `repeats ${names.get(key)!}` });
    if (taken.has(key))
      issues.push({
        field: `shards[${i}].name`,
        reason: `${shard.name} is a shard the inventory has already (${taken.get(key)!})`,
      });
    names.set(key, shard.name);
    shard.nodes.forEach((uuid, j) => {
      const field = `shards[${i}].nodes[${j}]`;
      const entry = byUuid.get(uuid);
      if (entry === undefined) issues.push({ field, reason: `${uuid} is not in the inventory` });
      else if (entry.shard !== null)
        issues.push({
          field,
          reason: `${uuid} has shard ${entry.shard} already: the plan moves unsharded nodes only`,
        });
      const earlier = placed.get(uuid);
      if (earlier !== undefined) issues.push({ field, reason: `${uuid} is planned into ${earlier} too` });
      placed.set(uuid, shard.name);
    });
  });
  const defined = new Map(plan.definitions.map((d, i) => [d.name, { d, i }]));
  plan.definitions.forEach((d, i) => {
    if (names.get(shardKey(d.name)) !== d.name)
      issues.push({ field: `definitions[${i}].name`, reason: `${d.name} is no planned shard` });
  });
  plan.shards.forEach((shard, i) => {
    const found = defined.get(shard.name);
    if (found === undefined)
      issues.push({ field: `shards[${i}].name`, reason: `${shard.name} has no definition` });
    else if (!found.d.agents.includes(shard.active))
      issues.push({
        field: `definitions[${found.i}].agents`,
        reason: `must include ${shard.active}, the shard's planned active agent`,
      });
  });
  return issues;
}

/**
 * Read and check a plan file. Anything wrong with the file itself — not JSON, a field
 * out of shape, a promise broken (see planIssues) — is bad input: a ConfigError (exit 2)
 * naming each field, before anything is read from Ironic or the bridge.
 */
export function readPlanFile(path: string): PlanFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ConfigError(`${path}: not a plan file: ${(error as Error).message}`);
  }
  let plan: PlanFile;
  try {
    plan = parseOrThrow(PlanFile, raw);
  } catch (error) {
    if (error instanceof ValidationError) throw new ConfigError(`${path}: ${error.message}`);
    throw error;
  }
  const issues = planIssues(plan);
  if (issues.length > 0)
    throw new ConfigError(`${path}: ${new ValidationError(issues.slice(0, 20)).message}`);
  return plan;
}
