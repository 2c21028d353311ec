import type { RingKind } from "./kinds.js";
import { buildRing, type LegacyRing } from "./legacy.js";
import { currentAgentOf, planShards, type PlanNode } from "./plan.js";
import { ToozRing } from "./tooz.js";

/** One node changing hands; `to` null: nobody manages it now. */
export interface NodeMove {
  uuid: string;
  from: string;
  to: string | null;
}

/** What one event does to the nodes under one way of placing them. */
export interface ModeOutcome {
  /** nodes that changed agent */
  moved: number;
  /** nodes left with no agent (their agent is gone and nothing takes them over) */
  unmanaged: number;
  /** distinct agents that took nodes over */
  agentsGaining: number;
  moves: NodeMove[];
}

export interface EventOutcome {
  event: "lost" | "back" | "added";
  agent: string;
  /** nova's ring over every agent (instances pinned to their host) */
  ring: ModeOutcome;
  /** explicit shards, one active and `standbys` passives each */
  shards: ModeOutcome;
}

export interface Comparison {
  nodes: number;
  agents: string[];
  ringKind: RingKind;
  /** shards on the shard side: existing keys plus those `migrate plan` proposes for unsharded nodes */
  shards: number;
  standbys: number;
  events: EventOutcome[];
}

function outcome(moves: NodeMove[]): ModeOutcome {
  const gaining = new Set(moves.flatMap((m) => (m.to === null ? [] : [m.to])));
  return {
    moved: moves.filter((m) => m.to !== null).length,
    unmanaged: moves.filter((m) => m.to === null).length,
    agentsGaining: gaining.size,
    moves,
  };
}

/** A shard with its active agent and its passives, in takeover order. */
interface ShardLayout {
  name: string;
  nodes: string[];
  active: string;
  passives: string[];
}

/**
 * The shard side: shard keys the inventory has, plus the zero-move plan for unsharded
 * nodes. A planned shard's active is the agent the ring gives its nodes today; an existing
 * shard's is dealt round-robin. Passives are the next agents in id order.
 */
function shardLayout(
  nodes: readonly PlanNode[],
  agents: string[],
  ring: LegacyRing,
  standbys: number,
): ShardLayout[] {
  const plan = planShards(nodes, ring);
  const existing = new Map<string, string[]>();
  for (const node of nodes) {
    if (node.shard !== null) existing.set(node.shard, [...(existing.get(node.shard) ?? []), node.uuid]);
  }
  const passivesAfter = (active: string) => {
    const at = agents.indexOf(active);
    const others = at < 0 ? agents : [...agents.slice(at + 1), ...agents.slice(0, at)];
    return others.filter((a) => a !== active).slice(0, standbys);
  };
  const dealt = [...existing.keys()].sort().map((name, i) => {
    const active = agents[i % agents.length]!;
    return { name, nodes: existing.get(name)!, active, passives: passivesAfter(active) };
  });
  const planned = plan.shards.map((s) => ({ ...s, passives: passivesAfter(s.active) }));
  return [...dealt, ...planned];
}

/**
 * For each agent lost, each agent back, and one agent added: which nodes move under nova's
 * ring and under shards with active/passive leases, from the same starting placement
 * (the shard side starts from `migrate plan`'s zero-move layout). Pure.
 *
 * Ring: a lost agent's nodes scatter over the others (a deployed node stays with its
 * instance's host, unmanaged); when it comes back they scatter back; an added agent
 * takes a share from everyone. Shards: a lost active's shards go whole to their first
 * passive; an agent back or added becomes a passive and takes nothing.
 */
export function compareEvents(
  nodes: readonly PlanNode[],
  agentIds: readonly string[],
  options: { kind?: RingKind; standbys?: number; added?: string; only?: readonly string[] } = {},
): Comparison {
  const kind = options.kind ?? "tooz";
  const standbys = options.standbys ?? 1;
  const agents = [...new Set(agentIds.map((a) => a.toLowerCase()))].sort();
  const added = (options.added ?? "new-agent").toLowerCase();
  const ring = buildRing(kind, agents);
  const toozRing = kind === "tooz" ? new ToozRing(agents) : null;
  const owner = new Map(nodes.map((n) => [n.uuid, currentAgentOf(n, ring)]));
  const pinned = new Set(nodes.filter((n) => n.instance_host !== null).map((n) => n.uuid));
  const layout = shardLayout(nodes, agents, ring, standbys);

  /** Where a node goes under the ring without `lost`: tooz skips its points (its `ignore`), ketama rebuilds. */
  const ringWithout = (lost: string): ((uuid: string) => string | null) => {
    if (toozRing !== null) return (uuid) => toozRing.lookup(uuid, { ignore: [lost] })[0] ?? null;
    const rebuilt = buildRing(
      kind,
      agents.filter((a) => a !== lost),
    );
    return (uuid) => rebuilt.memberOf(uuid);
  };

  const events: EventOutcome[] = [];
  for (const agent of options.only?.map((a) => a.toLowerCase()) ?? agents) {
    const elsewhere = ringWithout(agent);
    const ringLost: NodeMove[] = [];
    for (const [uuid, was] of owner) {
      if (was !== agent) continue;
      ringLost.push({ uuid, from: agent, to: pinned.has(uuid) ? null : elsewhere(uuid) });
    }
    const shardLost: NodeMove[] = layout
      .filter((s) => s.active === agent)
      .flatMap((s) => s.nodes.map((uuid) => ({ uuid, from: agent, to: s.passives[0] ?? null })));
    events.push({ event: "lost", agent, ring: outcome(ringLost), shards: outcome(shardLost) });
    // Back: the ring hands every node it moved back to the agent; leases stay where they are.
    const ringBack = ringLost
      .filter((m) => m.to !== null)
      .map((m) => ({ uuid: m.uuid, from: m.to!, to: agent }));
    events.push({ event: "back", agent, ring: outcome(ringBack), shards: outcome([]) });
  }
  const grown = buildRing(kind, [...agents, added]);
  const ringAdded: NodeMove[] = [];
  for (const [uuid, was] of owner) {
    if (pinned.has(uuid) || was === null) continue;
    if (grown.memberOf(uuid) === added) ringAdded.push({ uuid, from: was, to: added });
  }
  events.push({ event: "added", agent: added, ring: outcome(ringAdded), shards: outcome([]) });
  return { nodes: nodes.length, agents, ringKind: kind, shards: layout.length, standbys, events };
}
