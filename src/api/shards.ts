import { Router } from "express";
import type { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { leaseJson } from "./leases.js";

/** How Ironic names the unsharded pool in GET /v1/shards: the string "None". */
export const UNSHARDED_NAME = "None";

/**
 * GET /v1/shards, answered like Ironic's ({"shards":[{"name","count"}]}, most nodes
 * first, unsharded nodes under "None"), plus what an operator needs at a glance: each
 * shard's active holder, its token, time left and since when, and its description.
 * Defined or leased shards with no nodes are listed too (count 0): a definition nobody
 * uses, or a lease on a shard without nodes, is worth seeing.
 */
/**
 * Every shard the bridge knows of: defined in shards/, carrying nodes, or with lease
 * state (an agent may hold a shard that has neither), so no holder goes unseen.
 */
export async function knownShards(store: Store, catalog: ShardCatalog): Promise<Set<string>> {
  const shards = new Set(catalog.definitions.map((d) => d.name));
  for (const { shard } of await store.nodes.counts()) if (shard !== null) shards.add(shard);
  for (const shard of await store.leasedShards()) shards.add(shard);
  return shards;
}

export function shardRoutes(store: Store, catalog: ShardCatalog): Router {
  const router = Router();

  router.get("/v1/shards", async (_req, res) => {
    const counts = new Map<string | null, number>();
    for (const shard of await knownShards(store, catalog)) counts.set(shard, 0);
    for (const { shard, count } of await store.nodes.counts()) counts.set(shard, count);
    const shards = await Promise.all(
      [...counts].map(async ([shard, count]) => {
        const lease = shard === null ? null : (await store.read(shard)).current;
        return {
          name: shard ?? UNSHARDED_NAME,
          count,
          description: shard === null ? "" : (catalog.get(shard)?.description ?? ""),
          lease: lease && leaseJson(lease),
        };
      }),
    );
    shards.sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
    res.json({ shards });
  });

  return router;
}
