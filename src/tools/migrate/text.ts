import { agreeing, count } from "../../runtime/text/count.js";
import { renderTable } from "../../runtime/text/table.js";
import type { MigrationPlan } from "../../core/ring/plan.js";
import type { PlanFile } from "./plan-file.js";

/** The plan as a table of shards, and what it leaves alone or cannot place. */
export function planText(plan: MigrationPlan, maxPerShard: number): string {
  const planned = plan.shards.reduce((n, s) => n + s.nodes.length, 0);
  let out = renderTable(
    ["shard", "active agent", "nodes"],
    plan.shards.map((s) => [s.name, s.active, s.nodes.length]),
  );
  const left = `${count(plan.alreadySharded, "node")} already ${agreeing(plan.alreadySharded, "has", "have")} a shard key`;
  if (planned === 0 && plan.unplaced.length === 0)
    return `Nothing to migrate: no unsharded node (${left}).\n`;
  out +=
    `\n${count(planned, "unsharded node")} into ${count(plan.shards.length, "shard")} of at most ${maxPerShard}; ` +
    `no node changes agent. ${left} and ${agreeing(plan.alreadySharded, "is", "are")} left alone.\n`;
  if (plan.unplaced.length > 0) {
    out += `${count(plan.unplaced.length, "node")} ${agreeing(plan.unplaced.length, "is", "are")} not planned:\n`;
    for (const u of plan.unplaced.slice(0, 20)) out += `  ${u.uuid}: ${u.reason}\n`;
    if (plan.unplaced.length > 20) out += `  … and ${plan.unplaced.length - 20} more (see --json)\n`;
  }
  return out;
}

/**
 * The reviewed switch, step by step, with nova's side in the order nova-manage's
 * documentation gives for `db ironic_compute_node_move`: turn the old nova-compute off,
 * force it down, the new one (configured for its shard) takes the nodes, the nodes with
 * instances are moved by hand; then the old services are deleted. The new nova-computes
 * start first, under their leases, because `migrate apply` needs each planned shard held by
 * its agent; a nova-compute whose shard has no nodes yet manages nothing. The old ones
 * must be stopped before `apply` sets the keys: a nova-compute without `[ironic] shard`
 * lists every node, shard key or not, over a ring of every up service with compute nodes —
 * the new ones too, once they have some — and takes back the records its ring gives it at
 * each resource update (nova 34, test/openstack/nova-migrate.test.ts's trial with them left running:
 * 4 of 9 nodes went back and forth between old and new services, 32 host changes in 35 s).
 */
export function stepsText(file: PlanFile, path: string): string {
  const { services, old_services: old, moves } = file.nova;
  const lines = [
    `Plan written to ${path} (inventory ${file.inventory.fingerprint.slice(0, 19)}…). Review it, then:`,
    "",
    `1. shardbridge migrate prepare ${path}`,
    "     defines the planned shards in the bridge (TTL, allowed agent), marked filling",
    "2. one nova-compute per shard, started under its lease on its agent's host ([DEFAULT] host, [ironic] shard):",
    ...renderTable(
      ["shard", "agent", "[DEFAULT] host", "[ironic] shard"],
      services.map((s) => [s.shard, s.agent, s.host, s.shard]),
    )
      .trimEnd()
      .split("\n")
      .map((l) => `     ${l}`),
    `     e.g. shardbridge run --id ${services[0]?.agent ?? "AGENT"} --shard ${services[0]?.shard ?? "SHARD"} -- nova-compute --config-file /etc/nova/nova.conf`,
    "     (run sets both options, host SHARD-ironic by default; they start before apply, since each shard must be",
    "     held by its agent when its keys land; an empty shard manages nothing)",
    `3. stop the old nova-compute services (no [ironic] shard), before apply: ${old.join(", ") || "none"}`,
    "     (one left running lists every node, shard key or not, over a ring that takes in the new services once",
    "     they have nodes, and takes back the nodes its ring gives it at each update: they go back and forth)",
    "4. force them down (compute API 2.11 or later):",
    ...old.map(
      (host) =>
        `     openstack --os-compute-api-version 2.11 compute service set --down ${host} nova-compute`,
    ),
    `5. shardbridge migrate apply ${path} --ironic IRONIC_URL`,
    "     refuses if the inventory changed or a shard lacks its holder; writes the keys to Ironic and the bridge;",
    "     checks every node is managed by the agent that managed it before; each shard's nova-compute takes its",
    "     nodes without instances at its next resource update (update_resources_interval); if it refuses, it wrote",
    "     nothing: fix what it names and apply again, or bring the old services back (--up, start them)",
    // No node with an instance: a step that says so, not a heading with nothing under it.
    moves.length === 0
      ? "6. no planned node has an instance: nova moves every node itself, none by hand"
      : `6. move the ${count(moves.length, "node with an instance", "nodes with instances")} to ${agreeing(moves.length, "its", "their")} shard's service (nova moves the others itself):`,
    ...moves.map(
      (m) =>
        `     nova-manage db ironic_compute_node_move --ironic-node-uuid ${m.uuid} --destination-host ${m.to}`,
    ),
    "7. delete the old services once they hold no instances or compute nodes: openstack compute service delete ID",
    `8. shardbridge migrate verify ${path} --ironic IRONIC_URL   (again whenever in doubt)`,
  ];
  return `${lines.join("\n")}\n`;
}
