import type { BareMetalNode } from "../domain/node.js";
import type { LegacyRing } from "./legacy.js";

/** nova's `service_down_time`: a service not heard from for longer is down. */
export const SERVICE_DOWN_TIME_MS = 60_000;
/** How often nova rebuilds its ring (the `update_available_resource` periodic task). */
export const RING_REBUILD_MS = 60_000;

/** What the ring needs to know of an agent: when it was last heard from and what it serves. */
export interface AgentLiveness {
  agent: string;
  ageMs: number;
  serves: readonly string[];
}

/**
 * Whether an agent serves no shard, like a nova-compute without `[ironic] shard`: it
 * declared none in its last heartbeat (or never heartbeated) and holds no live lease.
 */
export function servesNoShard(
  agent: string,
  declared: readonly string[] | undefined,
  leaseHolders: ReadonlySet<string>,
): boolean {
  return (declared ?? []).length === 0 && !leaseHolders.has(agent);
}

/**
 * The legacy pool as nova sees it: agents that serve no shard (no `[ironic] shard`, and
 * no live lease either) and are up, heartbeat within `serviceDownMs` (nova's `is_up`:
 * elapsed <= service_down_time). Lower-cased, as nova puts hosts in its ring. Pure.
 */
export function legacyPoolMembers(
  agents: readonly AgentLiveness[],
  leaseHolders: ReadonlySet<string>,
  serviceDownMs = SERVICE_DOWN_TIME_MS,
): string[] {
  const members = agents
    .filter((a) => servesNoShard(a.agent, a.serves, leaseHolders) && a.ageMs <= serviceDownMs)
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
