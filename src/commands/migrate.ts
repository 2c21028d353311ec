import { parseArgs } from "node:util";
import { z } from "zod";
import { MemberList, RingKindName } from "../domain/ring.js";
import { BULK_MAX_NODES } from "../domain/node.js";
import { buildRing } from "../ring/legacy.js";
import { DEFAULT_MAX_PER_SHARD, currentAgentOf, planShards, type MigrationPlan } from "../ring/plan.js";
import { INVENTORY_OPTIONS, INVENTORY_USAGE, loadInventory, type InventorySource } from "./inventory.js";
import { integerFlag, flagsOrThrow } from "./io.js";
import { renderTable } from "../text/table.js";
import { ConfigError } from "../config.js";

export const MIGRATE_USAGE = `  migrate plan  shard keys for unsharded nodes such that moving from nova's ring to shards moves no node
             --agents a,b,c        the compute agents nova's ring spreads the nodes over today
${INVENTORY_USAGE}             --max-per-shard N     nodes per shard at most (default ${DEFAULT_MAX_PER_SHARD})
             --prefix P            shard names are P<agent>-<n> (default ring-)
             --ring KIND           tooz (nova's, default) or ketama
             --json                the plan as JSON, every node included
             --dry-run             print the plan only (the default)
             --apply               write each node's shard key where the inventory came from (--bridge or --ironic)
`;

/** Ironic PATCHes in flight at once. */
const IRONIC_PARALLEL = 8;

function describe(plan: MigrationPlan, maxPerShard: number): string {
  const planned = plan.shards.reduce((n, s) => n + s.nodes.length, 0);
  let out = renderTable(
    ["shard", "active agent", "nodes"],
    plan.shards.map((s) => [s.name, s.active, s.nodes.length]),
  );
  out +=
    `\n${planned} unsharded nodes into ${plan.shards.length} shards of at most ${maxPerShard}; ` +
    `0 nodes change agent. ${plan.alreadySharded} nodes already have a shard key and are left alone.\n`;
  if (plan.unplaced.length > 0) {
    out += `${plan.unplaced.length} nodes are not planned:\n`;
    for (const u of plan.unplaced.slice(0, 20)) out += `  ${u.uuid}: ${u.reason}\n`;
    if (plan.unplaced.length > 20) out += `  … and ${plan.unplaced.length - 20} more (see --json)\n`;
  }
  out +=
    "\nBefore --apply: have each active agent serve its shards (heartbeat with them and hold their" +
    "\nleases), so that a node's new shard has its old agent active the moment its key is written.\n";
  return out;
}

async function apply(
  plan: MigrationPlan,
  source: InventorySource,
): Promise<{ written: number; failed: string[] }> {
  const target = source.writable;
  if (target === null)
    throw new ConfigError("--apply writes where the inventory came from: plan from --bridge or --ironic");
  const shardOf = new Map(plan.shards.flatMap((s) => s.nodes.map((uuid) => [uuid, s.name] as const)));
  if (target.kind === "bridge") {
    // Re-read just before writing and change only the shard key; other fields are kept.
    const current = (await target.client.allNodes()).filter((n) => shardOf.has(n.uuid) && n.shard === null);
    const changed = current.map((n) => ({ ...n, shard: shardOf.get(n.uuid)! }));
    for (let i = 0; i < changed.length; i += BULK_MAX_NODES)
      await target.client.bulkUpsert(changed.slice(i, i + BULK_MAX_NODES));
    return { written: changed.length, failed: [] };
  }
  const queue = [...shardOf];
  const failed: string[] = [];
  let written = 0;
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      try {
        await target.client.setShard(next[0], next[1]);
        written++;
      } catch (error) {
        failed.push(`${next[0]}: ${(error as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: IRONIC_PARALLEL }, worker));
  return { written, failed };
}

export async function migrateCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== "plan")
    throw new ConfigError(`migrate: unknown subcommand ${sub ?? "(none)"}; try: migrate plan`);
  const { values } = parseArgs({
    args: rest,
    options: {
      ...INVENTORY_OPTIONS,
      agents: { type: "string" },
      "max-per-shard": { type: "string", default: String(DEFAULT_MAX_PER_SHARD) },
      prefix: { type: "string", default: "ring-" },
      ring: { type: "string", default: "tooz" },
      json: { type: "boolean", default: false },
      "dry-run": { type: "boolean", default: false },
      apply: { type: "boolean", default: false },
    },
  });
  if (values.apply && values["dry-run"]) throw new ConfigError("--apply and --dry-run: choose one");
  const flags = flagsOrThrow(
    z.strictObject({
      agents: MemberList,
      ring: RingKindName,
      prefix: z.string().regex(/^[a-zA-Z0-9_.-]{0,40}$/, { error: "must be 0..40 of a-z A-Z 0-9 _ . -" }),
    }),
    { agents: values.agents ?? "", ring: values.ring, prefix: values.prefix },
  );
  const maxPerShard = integerFlag("max-per-shard", values["max-per-shard"], 1, 100_000)!;
  const source = await loadInventory(values);
  const ring = buildRing(flags.ring, flags.agents);
  const plan = planShards(source.nodes, ring, { maxPerShard, prefix: flags.prefix });
  // The plan's promise, checked rather than assumed: every shard's nodes are its active's today.
  const where = new Map(source.nodes.map((n) => [n.uuid, n]));
  for (const shard of plan.shards)
    for (const uuid of shard.nodes)
      if (currentAgentOf(where.get(uuid)!, ring) !== shard.active) throw new Error(`plan would move ${uuid}`);
  const result = values.apply ? await apply(plan, source) : null;
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ ...plan, max_per_shard: maxPerShard, applied: result })}\n`);
  } else {
    process.stdout.write(describe(plan, maxPerShard));
    if (result === null) process.stdout.write("(dry run: nothing written; --apply writes the shard keys)\n");
    else {
      process.stdout.write(`applied to ${source.describe}: ${result.written} shard keys written\n`);
      for (const f of result.failed) process.stdout.write(`  failed: ${f}\n`);
    }
  }
  if (result !== null && result.failed.length > 0) process.exitCode = 1;
}
