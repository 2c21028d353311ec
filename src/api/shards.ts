import { Router } from "express";
import type { LeaseView } from "../lease/machine.js";
import type { ShardCount } from "../nodes/port.js";
import type { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { seesTokens, principalOf } from "./auth.js";
import { leaseJson } from "./leases.js";

/** How Ironic names the unsharded pool in GET /v1/shards: the string "None". */
export const UNSHARDED_NAME = "None";

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
 * GET /v1/shards, answered like Ironic's ({"shards":[{"name","count"}]}, most nodes
 * first, unsharded nodes under "None"), plus what an operator needs at a glance: each
 * shard's active holder, its token, time left and since when, and its description.
 * Defined or leased shards with no nodes are listed too (count 0): a definition nobody
 * uses, or a lease on a shard without nodes, is worth seeing.
 */
export function shardRoutes(store: Store, catalog: ShardCatalog): Router {
  const router = Router();

  router.get("/v1/shards", async (_req, res) => {
    const showTokens = seesTokens(principalOf(res));
    const nodeCounts = await store.nodes.counts();
    const known = await knownShards(store, catalog, nodeCounts);
    const leases = await liveLeases(store, known);
    const counts = new Map<string | null, number>([...known].map((shard) => [shard, 0]));
    for (const { shard, count } of nodeCounts) counts.set(shard, count);
    const shards = [...counts].map(([shard, count]) => {
      const lease = shard === null ? undefined : leases.get(shard);
      return {
        name: shard ?? UNSHARDED_NAME,
        count,
        description: shard === null ? "" : (catalog.get(shard)?.description ?? ""),
        lease: lease === undefined ? null : leaseJson(lease, showTokens),
      };
    });
    shards.sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
    res.json({ shards });
  });

  return router;
}
