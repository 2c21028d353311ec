import type { BareMetalNode } from "../node.js";
import type { LegacyRing } from "./legacy.js";

/** nova's `service_down_time`: a service not heard from for longer is down. */
export const SERVICE_DOWN_TIME_MS = 60_000;
/** How often nova rebuilds its ring (the `update_available_resource` periodic task). */
export const RING_REBUILD_MS = 60_000;

/** What the ring needs to know of an agent: when it was last heard from and what it serves. */
export interface RingAgent {
  agent: string;
  ageMs: number;
  serves: readonly string[];
}

/**
 * Whether serving `shard` (holding its lease, or declaring it in a heartbeat) takes an
 * agent out of the legacy pool.
 */
export type InService = (shard: string) => boolean;

/**
 * A shard takes its agent out of the legacy pool only once it carries nodes and is no
 * longer being filled from nova's ring (its definition's `filling`, set by `migrate
 * apply`). The rule is what makes the switch from the ring to shards safe at every
 * instant, as `GET /v1/agents/{id}/nodes` answers:
 * - before the switch an agent takes its planned shards' leases; they carry no nodes (or
 *   are marked filling), so it stays in the pool, in its own ring and in everyone else's,
 *   and keeps listing its ring share and its instances' nodes;
 * - during the switch each node moves on its own from the unsharded pool into its agent's
 *   shard (Ironic first, then the bridge, in any grouping; a concurrent `ironic-sync` may
 *   copy some of them early): a node not moved yet is still in its agent's ring share (the
 *   agent is still a pool member), a moved one is in its shard under the agent's lease, and
 *   the node list reads the ring and instance nodes before the leased shards, so a node
 *   that moves while the list is read is listed once, not missed;
 * - the switch ends by clearing `filling`: only then does the agent leave the pool, when
 *   nothing it served from the ring is left in it, so no other member's ring (rebuilt up to
 *   RING_REBUILD_MS later) gains a node.
 * Without `filling`, "carries nodes" alone would take an agent out the moment its first
 * node moved, with the rest of its share still unsharded: listed by nobody, or by another
 * member once that member's ring is rebuilt.
 */
export function shardInService(nodeCount: number, filling: boolean): boolean {
  return nodeCount > 0 && !filling;
}

/**
 * Whether an agent serves no shard, like a nova-compute without `[ironic] shard`: no shard
 * it declared in its last heartbeat, nor any it holds a live lease on, is in service.
 */
export function servesNoShard(
  declared: readonly string[] | undefined,
  held: Iterable<string>,
  inService: InService,
): boolean {
  for (const shard of declared ?? []) if (inService(shard)) return false;
  for (const shard of held) if (inService(shard)) return false;
  return true;
}

/**
 * The legacy pool as nova sees it: agents that serve no shard in service (see
 * servesNoShard; `held` gives each agent's live leases) and are up, heartbeat within
 * `serviceDownMs` (nova's `is_up`: elapsed <= service_down_time). Lower-cased, as nova
 * puts hosts in its ring. Pure.
 */
export function legacyPoolMembers(
  agents: readonly RingAgent[],
  held: ReadonlyMap<string, readonly string[]>,
  inService: InService,
  serviceDownMs = SERVICE_DOWN_TIME_MS,
): string[] {
  const members = agents
    .filter((a) => a.ageMs <= serviceDownMs && servesNoShard(a.serves, held.get(a.agent) ?? [], inService))
    .map((a) => a.agent.toLowerCase());
  return [...new Set(members)].sort();
}

/** Why a legacy node is an agent's: the ring placed it, or the agent's instance is on it. */
export type LegacyReason = "ring" | "instance";

/**
 * Which unsharded nodes `agent` manages, as nova would decide: a node with an instance
 * stays with the instance's host whatever the ring says; any other goes where the ring
 * places it. `ring` must already hold the agent itself (nova adds its own host). Pure.
 */
export function legacyNodesOf(
  agent: string,
  unsharded: readonly BareMetalNode[],
  ring: LegacyRing | null,
): Array<{ node: BareMetalNode; reason: LegacyReason }> {
  const me = agent.toLowerCase();
  const mine: Array<{ node: BareMetalNode; reason: LegacyReason }> = [];
  for (const node of unsharded) {
    if (node.instance_host !== null) {
      if (node.instance_host.toLowerCase() === me) mine.push({ node, reason: "instance" });
    } else if (ring !== null && ring.memberOf(node.uuid) === me) {
      mine.push({ node, reason: "ring" });
    }
  }
  return mine;
}
