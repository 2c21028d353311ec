import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { z } from "zod";
import { BridgeClient } from "../agent/bridge-client.js";
import { LEASE_TTL_DEFAULT_MS, LEASE_TTL_MAX_MS, LEASE_TTL_MIN_MS } from "../core/lease/bounds.js";
import { MemberList, RingKindName } from "../core/ring/kinds.js";
import { BULK_MAX_NODES } from "../core/node.js";
import { IronicClient } from "../upstream/ironic-client.js";
import { ironicAuthFromEnv } from "../upstream/keystone.js";
import { buildRing } from "../core/ring/legacy.js";
import { DEFAULT_MAX_PER_SHARD, currentAgentOf, planShards, type MigrationPlan } from "../core/ring/plan.js";
import { INVENTORY_OPTIONS, INVENTORY_USAGE, loadInventory, type InventorySource } from "./inventory.js";
import { IRONIC_AUTH_USAGE, integerFlag, flagsOrThrow, httpUrlFlag, tokenFlag } from "./io.js";
import { ConfigError } from "../runtime/config.js";
import { planFile, readPlanFile, type PlanFile } from "../tools/migrate/plan-file.js";
import { inParallel } from "../tools/migrate/fleet.js";
import { applyPlan, writeDefinitions } from "../tools/migrate/apply.js";
import { verifyPlan } from "../tools/migrate/verify.js";
import { planText, stepsText } from "../tools/migrate/text.js";
import { count } from "../runtime/text/count.js";

export const MIGRATE_USAGE = `  migrate plan  shard keys for unsharded nodes such that moving from nova's ring to shards moves no node
             --agents a,b,c        the compute agents nova's ring spreads the nodes over today
${INVENTORY_USAGE}             --max-per-shard N     nodes per shard at most (default ${DEFAULT_MAX_PER_SHARD})
             --prefix P            shard names are P<agent>-<n> (default ring-)
             --ring KIND           tooz (nova's, default) or ketama
             --out PLAN.json       write the plan to review and apply (from --bridge or --ironic): the inventory's
                                   fingerprint, nodes to shards, agents, shard definitions, nova's side; prints the steps
             --lease-ttl MS        the planned shards' lease TTL (default ${LEASE_TTL_DEFAULT_MS})
             --json                the plan as JSON, every node included
             --dry-run             print the plan only (the default)
             --apply               write each node's shard key where the inventory came from, unchecked
                                   (prefer --out and migrate apply)
  migrate prepare PLAN.json   define the planned shards in the bridge (TTL, allowed agent), marked filling,
                              so their agents can take the leases before apply
  migrate apply PLAN.json     check the plan still holds, then write the shard keys to Ironic and the bridge
             --force               write even where a planned shard is not held by its planned agent (those
                                   nodes are managed by nobody, or by the holder, until it is; the final check
                                   fails), or where the plan left nodes unplaced (nova's ring hands them to
                                   whoever stays in its pool, or to nobody)
  migrate verify PLAN.json    check an applied plan: keys, definitions, holders, every node with its planned agent
             (prepare, apply, verify) --bridge URL (env SHARDBRIDGE_URL), --token T (admin; env SHARDBRIDGE_TOKEN),
             --ironic URL (env SHARDBRIDGE_IRONIC_URL; required for a plan made from Ironic)
             exit status: 1 refused (nothing written) or a check failed, 2 a bad plan file or flag
${IRONIC_AUTH_USAGE}`;

/** Planned shard keys written at once by --apply. */
const IRONIC_PARALLEL = 8;

/** `plan --apply`: write each node's key where the inventory came from, as before reviewed plans existed. */
async function applyUnchecked(
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
  const failed = await inParallel(
    [...shardOf],
    IRONIC_PARALLEL,
    ([uuid]) => uuid,
    ([uuid, shard]) => target.client.setShard(uuid, shard),
  );
  return { written: shardOf.size - failed.length, failed };
}

async function planCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...INVENTORY_OPTIONS,
      agents: { type: "string" },
      "max-per-shard": { type: "string", default: String(DEFAULT_MAX_PER_SHARD) },
      prefix: { type: "string", default: "ring-" },
      ring: { type: "string", default: "tooz" },
      out: { type: "string" },
      "lease-ttl": { type: "string", default: String(LEASE_TTL_DEFAULT_MS) },
      json: { type: "boolean", default: false },
      "dry-run": { type: "boolean", default: false },
      apply: { type: "boolean", default: false },
    },
  });
  if (values.apply && values["dry-run"]) throw new ConfigError("--apply and --dry-run: choose one");
  if (values.apply && values.out !== undefined)
    throw new ConfigError("--out writes a plan to review: apply it with migrate apply, not --apply");
  if (values.out !== undefined && values.bridge === undefined && values.ironic === undefined)
    throw new ConfigError(
      "--out: plan from --bridge or --ironic, the inventories migrate apply can read again",
    );
  const flags = flagsOrThrow(
    z.strictObject({
      agents: MemberList,
      ring: RingKindName,
      prefix: z.string().regex(/^[a-zA-Z0-9_.-]{0,40}$/, { error: "must be 0..40 of a-z A-Z 0-9 _ . -" }),
    }),
    { agents: values.agents ?? "", ring: values.ring, prefix: values.prefix },
  );
  const maxPerShard = integerFlag("max-per-shard", values["max-per-shard"], 1, 100_000)!;
  const leaseTtlMs = integerFlag("lease-ttl", values["lease-ttl"], LEASE_TTL_MIN_MS, LEASE_TTL_MAX_MS)!;
  const source = await loadInventory(values);
  // A shard the bridge knows (defined, or leased) without nodes is taken too: no plan reuses its name.
  const taken =
    source.writable?.kind === "bridge" ? (await source.writable.client.shards()).map((s) => s.name) : [];
  const ring = buildRing(flags.ring, flags.agents);
  const plan = planShards(source.nodes, ring, { maxPerShard, prefix: flags.prefix, taken });
  // The plan's promise, checked rather than assumed: every shard's nodes are its active's today.
  const where = new Map(source.nodes.map((n) => [n.uuid, n]));
  for (const shard of plan.shards)
    for (const uuid of shard.nodes)
      if (currentAgentOf(where.get(uuid)!, ring) !== shard.active) throw new Error(`plan would move ${uuid}`);
  if (values.out !== undefined) {
    const file = planFile(
      plan,
      source.nodes,
      {
        source: source.writable!.kind,
        from: source.describe,
        ring: flags.ring,
        members: flags.agents,
      },
      { maxPerShard, leaseTtlMs },
    );
    writeFileSync(values.out, `${JSON.stringify(file, null, 1)}\n`);
    if (values.json) process.stdout.write(`${JSON.stringify(file)}\n`);
    // Nothing planned: no steps to follow (the file still records the inventory it read).
    else if (plan.shards.length === 0) process.stdout.write(planText(plan, maxPerShard));
    else process.stdout.write(`${planText(plan, maxPerShard)}\n${stepsText(file, values.out)}`);
    return;
  }
  const result = values.apply ? await applyUnchecked(plan, source) : null;
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ ...plan, max_per_shard: maxPerShard, applied: result })}\n`);
  } else {
    process.stdout.write(planText(plan, maxPerShard));
    if (result === null) {
      if (plan.shards.length > 0)
        process.stdout.write(
          "(dry run: nothing written; --out PLAN.json writes a plan to review and apply with migrate apply)\n",
        );
    } else {
      process.stdout.write(`applied to ${source.describe}: ${count(result.written, "shard key")} written\n`);
      for (const f of result.failed) process.stdout.write(`  failed: ${f}\n`);
    }
  }
  if (result !== null && result.failed.length > 0) process.exitCode = 1;
}

/** The plan file, bridge and Ironic that prepare, apply and verify work with. */
function planTargets(
  sub: string,
  argv: string[],
): { plan: PlanFile; bridge: BridgeClient; ironic: IronicClient | null; force: boolean } {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      bridge: { type: "string", default: process.env.SHARDBRIDGE_URL },
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      ...(sub === "apply" && { force: { type: "boolean", default: false } }),
    },
  });
  if (positionals.length !== 1)
    throw new ConfigError(`migrate ${sub}: give one plan file (migrate plan --out)`);
  if (values.bridge === undefined)
    throw new ConfigError(`migrate ${sub}: pass --bridge URL or set SHARDBRIDGE_URL`);
  if (values.token === undefined)
    throw new ConfigError(`migrate ${sub}: pass --token (an admin token) or set SHARDBRIDGE_TOKEN`);
  httpUrlFlag("bridge", values.bridge, "SHARDBRIDGE_URL");
  httpUrlFlag("ironic", values.ironic, "SHARDBRIDGE_IRONIC_URL");
  const plan = readPlanFile(positionals[0]!);
  if (plan.inventory.source === "ironic" && values.ironic === undefined && sub !== "prepare")
    throw new ConfigError(`migrate ${sub}: the plan was made from Ironic: pass --ironic URL`);
  return {
    plan,
    bridge: new BridgeClient(values.bridge, tokenFlag(values.token), 30_000),
    ironic: values.ironic === undefined ? null : new IronicClient(values.ironic, ironicAuthFromEnv()),
    force: (values as { force?: boolean }).force === true,
  };
}

const say = (line: string) => void process.stdout.write(`${line}\n`);

async function prepareCommand(argv: string[]): Promise<void> {
  const { plan, bridge } = planTargets("prepare", argv);
  const within = await writeDefinitions({ plan, bridge }, true);
  say(
    `defined ${count(plan.definitions.length, "shard")}, marked filling` +
      (within > 0 ? ` (in force on every bridge within ${within} ms)` : " (they were already)"),
  );
  say("now start each shard's agent; it takes the lease and stays in nova's legacy pool until apply:");
  for (const s of plan.shards) say(`  shardbridge run --id ${s.active} --shard ${s.name} -- nova-compute …`);
}

export async function migrateCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === "plan") return planCommand(rest);
  if (sub === "prepare") return prepareCommand(rest);
  if (sub === "apply") {
    const targets = planTargets("apply", rest);
    if (!(await applyPlan({ ...targets, say }))) process.exitCode = 1;
    return;
  }
  if (sub === "verify") {
    const targets = planTargets("verify", rest);
    if (!(await verifyPlan({ ...targets, say }))) process.exitCode = 1;
    return;
  }
  throw new ConfigError(
    `migrate: unknown subcommand ${sub ?? "(none)"}; try: migrate plan, prepare, apply, verify`,
  );
}
