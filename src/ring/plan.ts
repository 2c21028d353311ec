import type { BareMetalNode } from "../domain/node.js";
import type { LegacyRing } from "./legacy.js";

/** Upstream's practical ceiling of nodes per nova-compute service, and the default shard size cap. */
export const DEFAULT_MAX_PER_SHARD = 500;

/** What planning needs of a node. `has_instance` is for nodes whose instance host is unknown (Ironic only knows the instance). */
export type PlanNode = Pick<BareMetalNode, "uuid" | "shard" | "instance_host"> & { has_instance?: boolean };

/** A proposed shard: its name, the agent that must be active for it, its nodes. */
export interface ShardProposal {
  name: string;
  active: string;
  nodes: string[];
}

export interface MigrationPlan {
  shards: ShardProposal[];
  /** nodes that already have a shard key: left alone */
  alreadySharded: number;
  /** nodes the plan cannot place without guessing, and why */
  unplaced: Array<{ uuid: string; reason: string }>;
}

/** Where nova puts an unsharded node now: its instance's host, else the ring's member. Pure. */
export function currentAgentOf(node: PlanNode, ring: LegacyRing): string | null {
  return node.instance_host !== null ? node.instance_host.toLowerCase() : ring.memberOf(node.uuid);
}

/** A shard-name-safe form of an agent id (shard names are `[a-zA-Z0-9_.-]`). */
function shardSafe(agent: string): string {
  return agent.replace(/[^a-zA-Z0-9_.-]/g, "_").slice(0, 200);
}

/**
 * Shard keys for the unsharded nodes such that switching from the ring to shards moves no
 * node: every proposed shard holds nodes of one agent only (where the ring, or an
 * instance, puts them today), and that agent becomes the shard's active. An agent with
 * more than `maxPerShard` nodes gets several shards of near-equal size. Names are
 * `<prefix><agent>-<n>`, never one in `taken` (shards that exist already). Pure and
 * deterministic: nodes in uuid order.
 */
export function planShards(
  nodes: readonly PlanNode[],
  ring: LegacyRing,
  options: { maxPerShard?: number; prefix?: string; taken?: Iterable<string> } = {},
): MigrationPlan {
  const maxPerShard = options.maxPerShard ?? DEFAULT_MAX_PER_SHARD;
  const prefix = options.prefix ?? "ring-";
  const taken = new Set([
    ...(options.taken ?? []),
    ...nodes.flatMap((n) => (n.shard === null ? [] : [n.shard])),
  ]);
  const byAgent = new Map<string, string[]>();
  const unplaced: MigrationPlan["unplaced"] = [];
  let alreadySharded = 0;
  for (const node of [...nodes].sort((a, b) => (a.uuid < b.uuid ? -1 : 1))) {
    if (node.shard !== null) {
      alreadySharded++;
      continue;
    }
    if (node.instance_host === null && node.has_instance === true) {
      unplaced.push({
        uuid: node.uuid,
        reason: "has an instance whose host is unknown: set instance_host in the bridge and plan from it",
      });
      continue;
    }
    const agent = currentAgentOf(node, ring);
    if (agent === null) {
      unplaced.push({ uuid: node.uuid, reason: "the ring has no members" });
      continue;
    }
    byAgent.set(agent, [...(byAgent.get(agent) ?? []), node.uuid]);
  }
  const shards: ShardProposal[] = [];
  for (const agent of [...byAgent.keys()].sort()) {
    const uuids = byAgent.get(agent)!;
    const count = Math.ceil(uuids.length / maxPerShard);
    // Near-equal parts: the first (length % count) parts take one more node.
    const base = Math.floor(uuids.length / count);
    const extra = uuids.length % count;
    let at = 0;
    let suffix = 1;
    for (let part = 0; part < count; part++) {
      let name = `${prefix}${shardSafe(agent)}-${suffix++}`;
      while (taken.has(name)) name = `${prefix}${shardSafe(agent)}-${suffix++}`;
      taken.add(name);
      const size = base + (part < extra ? 1 : 0);
      shards.push({ name, active: agent, nodes: uuids.slice(at, at + size) });
      at += size;
    }
  }
  return { shards, alreadySharded, unplaced };
}
