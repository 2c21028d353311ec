import { createHash } from "node:crypto";
import { shardKey } from "../names.js";
import type { BareMetalNode } from "../node.js";
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
 * `<prefix><agent>-<n>`, never one in `taken` (shards that exist already), in any case. Pure and
 * deterministic: nodes in uuid order.
 */
export function planShards(
  nodes: readonly PlanNode[],
  ring: LegacyRing,
  options: { maxPerShard?: number; prefix?: string; taken?: Iterable<string> } = {},
): MigrationPlan {
  const maxPerShard = options.maxPerShard ?? DEFAULT_MAX_PER_SHARD;
  const prefix = options.prefix ?? "ring-";
  // By shardKey: a name equal to a taken one but for case is taken (one shard to nova and Ironic).
  const taken = new Set(
    [...(options.taken ?? []), ...nodes.flatMap((n) => (n.shard === null ? [] : [n.shard]))].map(shardKey),
  );
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
      while (taken.has(shardKey(name))) name = `${prefix}${shardSafe(agent)}-${suffix++}`;
      taken.add(shardKey(name));
      const size = base + (part < extra ? 1 : 0);
      shards.push({ name, active: agent, nodes: uuids.slice(at, at + size) });
      at += size;
    }
  }
  return { shards, alreadySharded, unplaced };
}

/**
 * What a plan was computed from, node by node: enough to tell, before anything is
 * written, whether the inventory is still the one the plan was made for. `has_instance`
 * is what Ironic knows (an instance_uuid) or, from the bridge, whether a host is set.
 */
export interface InventoryEntry {
  uuid: string;
  shard: string | null;
  instance_host: string | null;
  has_instance: boolean;
}

export const inventoryEntry = (node: PlanNode): InventoryEntry => ({
  uuid: node.uuid,
  shard: node.shard,
  instance_host: node.instance_host,
  has_instance: node.has_instance ?? node.instance_host !== null,
});

/**
 * A digest of an inventory and the ring it was planned over (kind, lower-cased members):
 * equal digests, same plan. Nodes in uuid order, so the order they were read in does
 * not matter. Pure.
 */
export function inventoryFingerprint(
  entries: readonly InventoryEntry[],
  ring: { kind: string; members: readonly string[] },
): string {
  const hash = createHash("sha256");
  hash.update(JSON.stringify([ring.kind, [...ring.members].map((m) => m.toLowerCase()).sort()]));
  for (const e of [...entries].sort((a, b) => (a.uuid < b.uuid ? -1 : 1)))
    hash.update(`\n${JSON.stringify([e.uuid, e.shard, e.instance_host, e.has_instance])}`);
  return `sha256:${hash.digest("hex")}`;
}

/** One way an inventory differs from the one a plan was made for. */
export interface InventoryChange {
  uuid: string;
  change: "added" | "removed" | "changed";
  /** for "changed": which fields, as `field: before -> now` */
  detail: string;
}

/**
 * How `now` differs from the inventory a plan was made for (`then`). A node that already
 * has the shard the plan gives it (`plannedShardOf`) counts as unchanged: an apply that
 * stopped half way is resumed, not refused. Nodes in uuid order. Pure.
 */
export function inventoryChanges(
  then: readonly InventoryEntry[],
  now: readonly InventoryEntry[],
  plannedShardOf: ReadonlyMap<string, string>,
): InventoryChange[] {
  const before = new Map(then.map((e) => [e.uuid, e]));
  const changes: InventoryChange[] = [];
  for (const raw of now) {
    const was = before.get(raw.uuid);
    if (was === undefined) {
      changes.push({ uuid: raw.uuid, change: "added", detail: `shard ${raw.shard ?? "none"}` });
      continue;
    }
    before.delete(raw.uuid);
    const e =
      raw.shard !== null && plannedShardOf.get(raw.uuid) === raw.shard ? { ...raw, shard: null } : raw;
    const fields = (["shard", "instance_host", "has_instance"] as const).flatMap((field) =>
      was[field] === e[field] ? [] : [`${field}: ${String(was[field])} -> ${String(e[field])}`],
    );
    if (fields.length > 0) changes.push({ uuid: raw.uuid, change: "changed", detail: fields.join(", ") });
  }
  for (const gone of before.values()) changes.push({ uuid: gone.uuid, change: "removed", detail: "" });
  return changes.sort((a, b) => (a.uuid < b.uuid ? -1 : 1));
}

/** One nova-compute per shard: the shard, the agent that runs it, and its nova settings. */
export interface NovaService {
  shard: string;
  agent: string;
  /** `[DEFAULT] host` */
  host: string;
}

/**
 * nova's side of a plan, in the order of nova's ironic-shards spec: one nova-compute per
 * shard (its `[DEFAULT] host` and `[ironic] shard`), the old ring services to stop and
 * force down, and a `nova-manage db ironic_compute_node_move` per node with an instance
 * (nova moves the others by itself once the old services are down). Pure.
 */
export function novaSide(
  plan: MigrationPlan,
  ringMembers: readonly string[],
  instanceHostOf: ReadonlyMap<string, string | null>,
  hostFor: (shard: string) => string,
): {
  services: NovaService[];
  oldServices: string[];
  moves: Array<{ uuid: string; from: string; to: string }>;
} {
  const services = plan.shards.map((s) => ({ shard: s.name, agent: s.active, host: hostFor(s.name) }));
  const moves = plan.shards.flatMap((s) =>
    s.nodes.flatMap((uuid) => {
      const from = instanceHostOf.get(uuid) ?? null;
      return from === null ? [] : [{ uuid, from, to: hostFor(s.name) }];
    }),
  );
  // Every service that managed nodes under the ring: its members and the instances' hosts.
  const oldServices = [
    ...new Set([...ringMembers.map((m) => m.toLowerCase()), ...plan.shards.map((s) => s.active)]),
  ].sort();
  return { services, oldServices, moves };
}
