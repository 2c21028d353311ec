import type { LeaseView } from "../../core/lease/machine.js";
import type { ShardCount } from "../../store/ports/nodes.js";
import {
  SERVICE_DOWN_TIME_MS,
  legacyPoolMembers,
  shardInService,
  type InService,
} from "../../core/ring/membership.js";
import type { Store } from "../../store/store.js";
import { fromStore } from "../../core/store-errors.js";
import { feedIdMs } from "../../store/ports/traits.js";
import type { ShardCatalog } from "./catalog.js";

/*
 * What the bridge knows of its shards and their leases, read from the store: the routers
 * show it, the legacy pool is computed from it.
 */

/**
 * Every shard the bridge knows of: defined in shards/, carrying nodes (`counts`, read
 * once by the caller), or with lease state (an agent may hold a shard that has
 * neither), so no holder goes unseen.
 */
export async function knownShards(
  store: Store,
  catalog: ShardCatalog,
  counts: ShardCount[],
): Promise<Set<string>> {
  const shards = new Set(catalog.definitions.map((d) => d.name));
  for (const { shard } of counts) if (shard !== null) shards.add(shard);
  for (const shard of await store.leasedShards()) shards.add(shard);
  return shards;
}

/** The live lease of each of `shards` that has one. */
export async function liveLeases(store: Store, shards: Iterable<string>): Promise<Map<string, LeaseView>> {
  const leases = new Map<string, LeaseView>();
  await Promise.all(
    [...shards].map(async (shard) => {
      const { current } = await store.read(shard);
      if (current !== null) leases.set(shard, current);
    }),
  );
  return leases;
}

/**
 * Per shard, how long the oldest trait change its active agent has not yet acknowledged
 * has waited, ms (0: it has read everything): the feed's lag. A Redis feed's entry ids
 * carry Redis's clock, judged here by the bridge's: the two are assumed in step to well
 * within a second, as on one NTP-synced network.
 */
export async function feedLags(
  store: Store,
  shards: readonly string[],
  nowMs = Date.now(),
): Promise<Map<string, number>> {
  const unread = await fromStore(() => store.traits.firstUnread(shards));
  return new Map(
    shards.map((shard, i) => [shard, unread[i] == null ? 0 : Math.max(0, nowMs - feedIdMs(unread[i]))]),
  );
}

/** The shards each agent holds a live lease on, sorted. */
export function heldByAgent(leases: Map<string, LeaseView>): Map<string, string[]> {
  const held = new Map<string, string[]>();
  for (const [shard, lease] of leases) held.set(lease.holder, [...(held.get(lease.holder) ?? []), shard]);
  for (const shards of held.values()) shards.sort();
  return held;
}

/** Which shards take their agent out of nova's legacy pool now (see shardInService). */
export function inServiceOf(catalog: ShardCatalog, counts: readonly ShardCount[]): InService {
  const carrying = new Set(
    counts.flatMap(({ shard, count }) => (shard !== null && count > 0 ? [shard] : [])),
  );
  return (shard) => shardInService(carrying.has(shard) ? 1 : 0, catalog.isFilling(shard));
}

/**
 * The legacy pool's members as nova would list them now (up, serving no shard in
 * service), from one read of the agents, every live lease and the node counts: what the
 * ring is rebuilt from (see LegacyPool).
 */
export function legacyPoolLoader(store: Store, catalog: ShardCatalog, serviceDownMs = SERVICE_DOWN_TIME_MS) {
  return async (): Promise<string[]> => {
    const [seen, counts] = await Promise.all([store.agents(), store.nodes.counts()]);
    const leases = await liveLeases(store, await knownShards(store, catalog, counts));
    return legacyPoolMembers(seen, heldByAgent(leases), inServiceOf(catalog, counts), serviceDownMs);
  };
}
