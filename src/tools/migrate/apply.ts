import type { BridgeClient } from "../../agent/bridge-client.js";
import type { ShardDefinition } from "../../contracts/shards.js";
import type { IronicClient } from "../../upstream/ironic-client.js";
import { inventoryChanges } from "../../core/ring/plan.js";
import type { PlanFile } from "./plan-file.js";
import {
  bridgeShards,
  holdersNow,
  inParallel,
  inventoryNow,
  ironicShards,
  listingChanges,
  listingNow,
  shown,
} from "./fleet.js";
import { verifyPlan } from "./verify.js";
import { agreeing, count } from "../../runtime/text/count.js";

/** Shard keys written at once, to Ironic and to the bridge. */
const PARALLEL_WRITES = 8;

/** `migrate apply` would not write: what it found, and what to do. Nothing was written. */
export class MigrationRefused extends Error {
  constructor(lines: string[]) {
    super(`refused; nothing written:\n${lines.map((l) => `  ${l}`).join("\n")}`);
    this.name = "MigrationRefused";
  }
}

export interface ApplyContext {
  plan: PlanFile;
  bridge: BridgeClient;
  ironic: IronicClient | null;
  force: boolean;
  say: (line: string) => void;
  sleep?: (ms: number) => Promise<void>;
}

const plannedShardOf = (plan: PlanFile) =>
  new Map(plan.shards.flatMap((s) => s.nodes.map((uuid) => [uuid, s.name] as const)));

/**
 * Whether the plan still holds: the inventory is the one it was made for, Ironic and the
 * bridge both have every planned node unsharded (or already in its planned shard), no
 * planned shard name is in use otherwise, and every planned node is managed now by
 * exactly its planned agent. Throws MigrationRefused naming what differs.
 */
async function checkPlanHolds(ctx: ApplyContext, listing: Map<string, string[]>): Promise<void> {
  const { plan, bridge, ironic } = ctx;
  const planned = plannedShardOf(plan);
  const changed = inventoryChanges(
    plan.inventory.nodes,
    await inventoryNow(plan.inventory.source, bridge, ironic),
    planned,
  );
  if (changed.length > 0)
    throw new MigrationRefused([
      `the inventory (${plan.inventory.source}) changed since the plan was made: ${count(changed.length, "node")}`,
      ...shown(changed.map((c) => `${c.uuid} ${c.change}${c.detail === "" ? "" : `: ${c.detail}`}`)),
      "plan again (migrate plan --out) and review the new plan",
    ]);
  const stores: Array<[string, Map<string, string | null>]> = [["bridge", await bridgeShards(bridge)]];
  if (ironic !== null) stores.push(["Ironic", await ironicShards(ironic)]);
  const misplaced: string[] = [];
  for (const [where, shards] of stores) {
    for (const [uuid, shard] of planned) {
      const now = shards.get(uuid);
      if (now === undefined)
        misplaced.push(`${uuid}: not in ${where}${where === "bridge" ? " (run ironic-sync)" : ""}`);
      else if (now !== null && now !== shard)
        misplaced.push(`${uuid}: has shard ${now} in ${where}, planned ${shard}`);
    }
    for (const [uuid, shard] of shards)
      if (shard !== null && plan.shards.some((s) => s.name === shard) && planned.get(uuid) !== shard)
        misplaced.push(`${uuid}: in ${where} already carries planned shard name ${shard}`);
  }
  if (misplaced.length > 0)
    throw new MigrationRefused([
      "Ironic and the bridge must both have every planned node unsharded (or in its planned shard):",
      ...shown(misplaced),
    ]);
  const members = (await bridge.agents()).agents
    .filter((a) => a.legacy_pool)
    .map((a) => a.id.toLowerCase())
    .sort();
  const misplacedNow: string[] = [];
  for (const shard of plan.shards)
    for (const uuid of shard.nodes) {
      const who = listing.get(uuid) ?? [];
      if (who.length !== 1 || who[0] !== shard.active.toLowerCase())
        misplacedNow.push(
          `${uuid}: managed by ${who.join("+") || "nobody"} now, the plan keeps it with ${shard.active}`,
        );
    }
  if (misplacedNow.length > 0)
    throw new MigrationRefused([
      "the plan's promise (no node changes agent) does not hold against the bridge now:",
      ...shown(misplacedNow),
      `nova's legacy pool is now ${members.join(", ") || "empty"}; the plan's ring is ${plan.inventory.members.join(", ")}`,
      "every ring member must be up and in the pool (an agent holding its planned, empty shards stays in it)",
    ]);
}

/**
 * Every planned shard must be held by its planned agent before its keys land, so its
 * nodes are that agent's the moment they leave the pool. With `force`, say what it risks.
 */
async function checkHolders(ctx: ApplyContext): Promise<void> {
  const holders = await holdersNow(ctx.bridge);
  const missing = ctx.plan.shards.flatMap((s) => {
    const holder = holders.get(s.name);
    if (holder === s.active.toLowerCase()) return [];
    return [
      holder === undefined
        ? `${s.name}: no live lease; start its agent first, e.g. shardbridge run --id ${s.active} --shard ${s.name} -- nova-compute …`
        : `${s.name}: held by ${holder}, planned ${s.active}`,
    ];
  });
  if (missing.length === 0) return;
  const nodes = ctx.plan.shards
    .filter((s) => holders.get(s.name) !== s.active.toLowerCase())
    .reduce((n, s) => n + s.nodes.length, 0);
  if (!ctx.force)
    throw new MigrationRefused([
      `${count(missing.length, "planned shard")} ${agreeing(missing.length, "is not held by its", "are not held by their")} planned agent:`,
      ...shown(missing),
      "(--force writes anyway: see migrate apply --help for what it risks)",
    ]);
  ctx.say(
    `--force: ${count(missing.length, "planned shard")} ${agreeing(missing.length, "is not held by its", "are not held by their")} planned agent ` +
      `(${count(nodes, "node")}). From the ` +
      "moment their keys land those nodes are managed by nobody (no lease) or by the holder shown, not by the " +
      "agent that manages them now, until the planned agent holds the lease; the final check below lists them:",
  );
  for (const line of shown(missing)) ctx.say(`  ${line}`);
}

/**
 * Write the planned definitions, marked `filling` or not, where the bridge does not hold
 * them so already; answers how soon every bridge uses them (0: nothing written). A
 * planned shard a file of the bridge defines is refused (its `filling` could not be set).
 */
export async function writeDefinitions(
  ctx: Pick<ApplyContext, "plan" | "bridge">,
  filling: boolean,
): Promise<number> {
  const { definitions } = await ctx.bridge.shardDefinitions();
  const current = new Map<string, ShardDefinition>(definitions.map((d) => [d.name, d]));
  let within = 0;
  for (const d of ctx.plan.definitions) {
    const now = current.get(d.name);
    if (now?.source === "file")
      throw new MigrationRefused([
        `shard ${d.name} is defined by a file of the bridge: remove shards/${d.name}.json`,
      ]);
    const same =
      now !== undefined &&
      now.source === "store" &&
      now.filling === filling &&
      now.lease_ttl_ms === d.lease_ttl_ms &&
      now.description === d.description &&
      JSON.stringify(now.agents) === JSON.stringify(d.agents);
    if (same) continue;
    const written = await ctx.bridge.defineShard(d.name, {
      description: d.description,
      lease_ttl_ms: d.lease_ttl_ms,
      agents: d.agents,
      filling,
    });
    within = written.takes_effect_within_ms;
  }
  return within;
}

/**
 * How far an earlier run got: every planned key in place (in the bridge, and in Ironic
 * when given), and whether a planned shard is still marked filling. A run that got that
 * far must not mark the shards filling again: their agents would step back into nova's
 * pool for nothing.
 */
async function progress({
  plan,
  bridge,
  ironic,
}: ApplyContext): Promise<{ keys: boolean; filling: boolean }> {
  const planned = plannedShardOf(plan);
  const stores = [await bridgeShards(bridge), ...(ironic === null ? [] : [await ironicShards(ironic)])];
  const keys = stores.every((shards) => [...planned].every(([uuid, shard]) => shards.get(uuid) === shard));
  const names = new Set(planned.values());
  const filling = (await bridge.shardDefinitions()).definitions.some((d) => names.has(d.name) && d.filling);
  return { keys, filling };
}

/** Clear `filling` (the agents leave the pool), then the final check against `before`. */
async function finish(ctx: ApplyContext, before: Map<string, string[]>, agents: string[]): Promise<boolean> {
  const { plan, bridge, ironic, say } = ctx;
  await writeDefinitions(ctx, false);
  say(
    `filling cleared: ${count(agents.length, "agent")} ${agreeing(agents.length, "serves its shards and leaves", "serve their shards and leave")} nova's legacy pool`,
  );
  const changes = listingChanges(before, await listingNow(bridge, agents));
  if (changes.length > 0) {
    say(
      `FAILED: ${count(changes.length, "node")} ${agreeing(changes.length, "is", "are")} not managed by the agent that managed ${agreeing(changes.length, "it", "them")} before:`,
    );
    for (const line of shown(changes)) say(`  ${line}`);
    return false;
  }
  say("every node is managed by the agent that managed it before");
  return verifyPlan({ plan, bridge, ironic, say, quiet: true });
}

/**
 * Apply a reviewed plan, in this order (why: src/core/ring/membership.ts and the README):
 * 1. check, writing nothing: the inventory is the plan's, both stores agree, every planned
 *    node is managed by its planned agent now, every planned shard is held by it;
 * 2. define the planned shards in the store, marked `filling` (their holders stay in nova's
 *    legacy pool however many of their nodes have moved), and wait until every bridge has them;
 * 3. write the shard keys to Ironic;
 * 4. touch the definitions again and wait: an `ironic-sync` that read Ironic before step 3
 *    finds the definitions changed and writes nothing (see ironic-sync), one that read it
 *    after copies the new keys; a sync already writing has finished;
 * 5. write the shard keys to the bridge (each node on its own; `filling` covers the mix);
 * 6. check every planned node has its key in the bridge; then clear `filling`: the agents
 *    leave the pool with nothing of theirs left in it;
 * 7. check every node is managed by the agent that managed it before (exit 1 if not).
 * Answers whether the final check passed.
 */
export async function applyPlan(ctx: ApplyContext): Promise<boolean> {
  const { plan, bridge, ironic, say } = ctx;
  const sleep = ctx.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const planned = plannedShardOf(plan);
  const agents = [...new Set(plan.shards.map((s) => s.active))];

  const done = await progress(ctx);
  if (done.keys && !done.filling) {
    say("already applied: every planned node has its shard key and no planned shard is filling");
    return verifyPlan({ plan, bridge, ironic, say });
  }
  if (done.keys) {
    say("every planned node has its shard key already (an earlier run stopped before the end)");
    return finish(ctx, await listingNow(bridge, agents), agents);
  }
  if (plan.unplaced.length > 0 && !ctx.force)
    throw new MigrationRefused([
      `${count(plan.unplaced.length, "node")} ${agreeing(plan.unplaced.length, "is", "are")} not planned (e.g. ${plan.unplaced[0]!.uuid}: ${plan.unplaced[0]!.reason}):`,
      "once the agents leave nova's pool, nova's ring hands them to whoever is left in it, or to nobody.",
      "plan from the bridge with their instance hosts set, or --force",
    ]);
  if (ironic === null)
    say(
      "no --ironic: the shard keys go to the bridge only; where the bridge is kept from Ironic, the next " +
        "ironic-sync would take them back (pass --ironic)",
    );
  const before = await listingNow(bridge, agents);
  await checkPlanHolds(ctx, before);
  await checkHolders(ctx);
  say(
    `checked: inventory unchanged (${plan.inventory.fingerprint.slice(0, 19)}…), every planned node with its agent`,
  );

  const within = await writeDefinitions(ctx, true);
  if (within > 0) {
    say(
      `defined ${count(plan.definitions.length, "shard")}, marked filling; waiting ${2 * within} ms for every bridge`,
    );
    await sleep(2 * within);
  }

  const ironicNow = ironic === null ? new Map<string, string | null>() : await ironicShards(ironic);
  const toIronic =
    ironic === null ? [] : [...planned].filter(([uuid, shard]) => ironicNow.get(uuid) !== shard);
  const ironicFailed = await inParallel(
    toIronic,
    PARALLEL_WRITES,
    ([uuid]) => uuid,
    ([uuid, shard]) => ironic!.setShard(uuid, shard),
  );
  if (ironic !== null) say(`Ironic: ${count(toIronic.length - ironicFailed.length, "shard key")} written`);
  if (ironicFailed.length > 0)
    throw new Error(
      `${count(ironicFailed.length, "shard key")} not written to Ironic (the shards stay marked filling: every ` +
        `node is still managed as before; run migrate apply again):\n${shown(ironicFailed).join("\n")}`,
    );

  // The barrier for ironic-sync (step 4): a changed definitions version.
  const { name: first, ...body } = plan.definitions[0]!;
  const touched = await bridge.defineShard(first, { ...body, filling: true });
  await sleep(2 * touched.takes_effect_within_ms);

  const bridgeNow = await bridgeShards(bridge);
  const toBridge = [...planned].filter(([uuid, shard]) => bridgeNow.get(uuid) !== shard);
  const bridgeFailed = await inParallel(
    toBridge,
    PARALLEL_WRITES,
    ([uuid]) => uuid,
    async ([uuid, shard]) => void (await bridge.patchNode(uuid, { shard })),
  );
  say(`bridge: ${count(toBridge.length - bridgeFailed.length, "shard key")} written`);
  const landed = await bridgeShards(bridge);
  const missing = [...planned].filter(([uuid, shard]) => landed.get(uuid) !== shard).map(([uuid]) => uuid);
  if (bridgeFailed.length > 0 || missing.length > 0)
    throw new Error(
      `${count(missing.length, "planned node")} ${agreeing(missing.length, "lacks its", "lack their")} shard key in the bridge (the shards stay marked filling: ` +
        `every node is still managed as before; run migrate apply again):\n${shown([...bridgeFailed, ...missing]).join("\n")}`,
    );

  return finish(ctx, before, agents);
}
