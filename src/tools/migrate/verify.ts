import type { BridgeClient } from "../../agent/bridge-client.js";
import type { IronicClient } from "../../upstream/ironic-client.js";
import type { PlanFile } from "./plan-file.js";
import { bridgeShards, holdersNow, ironicShards, listingNow, ringMovesAhead, shown } from "./fleet.js";
import { count } from "../../runtime/text/count.js";

export interface VerifyContext {
  plan: PlanFile;
  bridge: BridgeClient;
  ironic: IronicClient | null;
  say: (line: string) => void;
  /** print only what failed (apply's last step) */
  quiet?: boolean;
}

/**
 * Whether an applied plan holds now: every planned node has its planned shard in the
 * bridge (and in Ironic, when given); every planned shard is defined, no longer filling,
 * and held by its planned agent; every planned node is managed by exactly that agent (as
 * the bridge answers GET /v1/agents/{id}/nodes); and nova's ring, at its next rebuild,
 * moves no unsharded node. Prints one line per check; answers whether all passed.
 */
export async function verifyPlan(ctx: VerifyContext): Promise<boolean> {
  const { plan, bridge, ironic, say } = ctx;
  const agents = [...new Set(plan.shards.map((s) => s.active))];
  const checks: Array<[string, string[]]> = [];

  const keysIn = (where: string, shards: Map<string, string | null>) =>
    plan.shards.flatMap((s) =>
      s.nodes.flatMap((uuid) => {
        const now = shards.get(uuid);
        return now === s.name
          ? []
          : [`${uuid}: ${now === undefined ? "absent" : (now ?? "no shard")} in ${where}, planned ${s.name}`];
      }),
    );
  checks.push(["shard keys in the bridge", keysIn("the bridge", await bridgeShards(bridge))]);
  if (ironic !== null) checks.push(["shard keys in Ironic", keysIn("Ironic", await ironicShards(ironic))]);

  const { definitions } = await bridge.shardDefinitions();
  const defined = new Map(definitions.map((d) => [d.name, d]));
  checks.push([
    "shard definitions (TTL, agents, not filling)",
    plan.shards.flatMap((s) => {
      const d = defined.get(s.name);
      if (d === undefined) return [`${s.name}: not defined`];
      if (d.filling) return [`${s.name}: still marked filling (migrate apply did not finish: run it again)`];
      if (d.agents !== null && !d.agents.map((a) => a.toLowerCase()).includes(s.active.toLowerCase()))
        return [`${s.name}: ${s.active} may not serve it (agents: ${d.agents.join(", ")})`];
      return [];
    }),
  ]);

  const holders = await holdersNow(bridge);
  checks.push([
    "each planned shard held by its planned agent",
    plan.shards.flatMap((s) => {
      const holder = holders.get(s.name);
      return holder === s.active.toLowerCase()
        ? []
        : [`${s.name}: ${holder === undefined ? "no live lease" : `held by ${holder}`}, planned ${s.active}`];
    }),
  ]);

  const listing = await listingNow(bridge, agents);
  checks.push([
    "each planned node managed by its agent, and by no other",
    plan.shards.flatMap((s) =>
      s.nodes.flatMap((uuid) => {
        const who = listing.get(uuid) ?? [];
        return who.length === 1 && who[0] === s.active.toLowerCase()
          ? []
          : [`${uuid}: managed by ${who.join("+") || "nobody"}, planned ${s.active}`];
      }),
    ),
  ]);
  checks.push([
    "no unsharded node moves at nova's next ring rebuild",
    await ringMovesAhead(bridge, listing, plan.inventory.ring),
  ]);

  let ok = true;
  for (const [check, problems] of checks) {
    if (problems.length === 0) {
      if (ctx.quiet !== true) say(`ok      ${check}`);
      continue;
    }
    ok = false;
    say(`FAILED  ${check}: ${problems.length}`);
    for (const line of shown(problems)) say(`          ${line}`);
  }
  const nodes = plan.shards.reduce((n, s) => n + s.nodes.length, 0);
  say(
    ok
      ? `verified: ${count(nodes, "node")} in ${count(plan.shards.length, "shard")}, each managed by its planned agent`
      : "verification FAILED (see above)",
  );
  return ok;
}
