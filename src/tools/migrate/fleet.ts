import type { BridgeClient } from "../../agent/bridge-client.js";
import type { IronicClient } from "../../upstream/ironic-client.js";
import { buildRing } from "../../core/ring/legacy.js";
import { inventoryEntry, type InventoryEntry } from "../../core/ring/plan.js";
import type { RingKind } from "../../core/ring/kinds.js";

/*
 * What the bridge and Ironic say now, read for `migrate apply` and `migrate verify`:
 * each is one picture of the fleet, compared with the plan or with an earlier picture.
 */

/** The inventory as the plan's source holds it now, in the plan's terms. */
export async function inventoryNow(
  source: "bridge" | "ironic",
  bridge: BridgeClient,
  ironic: IronicClient | null,
): Promise<InventoryEntry[]> {
  if (source === "bridge") return (await bridge.allNodes()).map(inventoryEntry);
  return (await ironic!.nodes()).map((n) =>
    inventoryEntry({
      uuid: n.uuid,
      shard: n.shard,
      instance_host: null,
      has_instance: n.instance_uuid !== null,
    }),
  );
}

/** Each node's shard as Ironic holds it (nodes Ironic does not have are absent). */
export async function ironicShards(ironic: IronicClient): Promise<Map<string, string | null>> {
  return new Map((await ironic.nodes()).map((n) => [n.uuid, n.shard]));
}

/** Each node's shard as the bridge holds it. */
export async function bridgeShards(bridge: BridgeClient): Promise<Map<string, string | null>> {
  return new Map((await bridge.allNodes()).map((n) => [n.uuid, n.shard]));
}

/**
 * Who manages each node now, as the bridge answers every agent that asks for its nodes
 * (GET /v1/agents/{id}/nodes, as admin: every shard it holds): node -> the agents that
 * list it, lower-cased (nova compares hosts so). Asked of every agent the bridge knows
 * (heartbeats and lease holders) and of `also`. A node no agent lists is absent.
 */
export async function listingNow(
  bridge: BridgeClient,
  also: readonly string[] = [],
): Promise<Map<string, string[]>> {
  const { agents } = await bridge.agents();
  const ids = [...new Set([...agents.map((a) => a.id), ...also])].sort();
  const lists = await Promise.all(ids.map(async (id) => ({ id, list: await bridge.nodesOf(id) })));
  const agentsOf = new Map<string, string[]>();
  for (const { id, list } of lists)
    for (const node of list.nodes) {
      const listed = agentsOf.get(node.uuid) ?? [];
      if (!listed.includes(id.toLowerCase())) listed.push(id.toLowerCase());
      agentsOf.set(node.uuid, listed.sort());
    }
  return agentsOf;
}

/** The live holder of each shard that has one (lower-cased), from GET /v1/shards. */
export async function holdersNow(bridge: BridgeClient): Promise<Map<string, string>> {
  const holders = new Map<string, string>();
  for (const shard of await bridge.shards())
    if (shard.lease !== null) holders.set(shard.name, shard.lease.holder.toLowerCase());
  return holders;
}

/** Nodes whose managing agents differ between two listings, each as `uuid: before -> now`. */
export function listingChanges(before: Map<string, string[]>, now: Map<string, string[]>): string[] {
  const uuids = [...new Set([...before.keys(), ...now.keys()])].sort();
  const who = (agents: string[] | undefined) => (agents === undefined ? "nobody" : agents.join("+"));
  return uuids.flatMap((uuid) => {
    const [was, is] = [who(before.get(uuid)), who(now.get(uuid))];
    return was === is ? [] : [`${uuid}: ${was} -> ${is}`];
  });
}

/**
 * The unsharded nodes nova's ring would move at its next rebuild (up to 60 s away): each
 * free node (no shard, no instance) whose ring member over today's pool differs from who
 * lists it now — e.g. because an agent left the pool with nodes still in its share.
 */
export async function ringMovesAhead(
  bridge: BridgeClient,
  listing: Map<string, string[]>,
  kind: RingKind,
): Promise<string[]> {
  const { agents } = await bridge.agents();
  const ring = buildRing(
    kind,
    agents.filter((a) => a.legacy_pool).map((a) => a.id),
  );
  return (await bridge.allNodes()).flatMap((node) => {
    if (node.shard !== null || node.instance_host !== null) return [];
    const next = ring.memberOf(node.uuid);
    const now = listing.get(node.uuid)?.join("+") ?? "nobody";
    return next === now ? [] : [`${node.uuid}: ${now} -> ${next ?? "nobody"}`];
  });
}

/**
 * Run `work` on every item, `parallel` at a time; answers the failures, each as
 * `item: message`, in the order they happened.
 */
export async function inParallel<T>(
  items: readonly T[],
  parallel: number,
  name: (item: T) => string,
  work: (item: T) => Promise<void>,
): Promise<string[]> {
  const queue = [...items];
  const failed: string[] = [];
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      try {
        await work(next);
      } catch (error) {
        failed.push(`${name(next)}: ${(error as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return failed;
}

/** Items of a list printed before "… and N more". */
const SHOWN = 20;

/** `lines`, at most SHOWN of them, then how many more. */
export function shown(lines: readonly string[]): string[] {
  return lines.length <= SHOWN
    ? [...lines]
    : [...lines.slice(0, SHOWN), `… and ${lines.length - SHOWN} more`];
}
