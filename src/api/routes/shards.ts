import { DeclaredRoutes } from "../http/declared-routes.js";
import { parseOrThrow } from "../../core/validation.js";
import { HttpError } from "../http/errors.js";
import { ShardPath } from "../http/paths.js";
import type { ShardCatalog } from "../../bridge/shards/catalog.js";
import type { Store } from "../../store/store.js";
import { seesTokens, principalOf } from "../http/auth.js";
import { conflict } from "../http/errors.js";
import { logger } from "../../runtime/log.js";
import { leaseCensus, shardsOverview } from "../../bridge/shards/overview.js";
import { leaseJson } from "../../bridge/shards/lease-json.js";
import type { Shard, ShardList } from "../../contracts/shards.js";
import { READ, ADMIN, type Operation } from "../openapi/operation.js";

/** The shard routes' operations, as the document lists them (operations.ts) and the role checks read them. */
export const SHARD_OPERATIONS = {
  listShards: {
    method: "get",
    path: "/v1/shards",
    id: "listShards",
    tag: "shards",
    summary: "Every shard: node count, holder, feed lag",
    description:
      'Most nodes first; unsharded nodes under "None" (as Ironic answers); defined or leased shards without nodes with count 0. `feed_lag_ms`: how long the oldest trait change the holder has not acknowledged has waited (null for "None").',
    access: READ,
    answers: { 200: { description: "the shards", schema: "ShardList" } },
  },
  getShard: {
    method: "get",
    path: "/v1/shards/{shard}",
    id: "getShard",
    tag: "shards",
    summary: "One shard as an agent needs it before serving it",
    description:
      "Its TTL, who may serve it (`agents` null: any agent), where its definition comes from (`defined_by`: `file`, `store` or null) and whether `migrate apply` is still filling it, node count, live lease, and the fenced Ironic endpoint (`{token}` to fill in) when the bridge fronts an Ironic.",
    access: READ,
    parameters: ["shard"],
    answers: {
      200: { description: "the shard", schema: "Shard" },
      404: {
        description: "neither defined, carrying nodes, nor leased since forgotten",
        codes: ["shard.not_found"],
      },
    },
  },
  forgetShard: {
    method: "delete",
    path: "/v1/shards/{shard}",
    id: "forgetShard",
    tag: "shards",
    summary: "Forget a shard's lease history (a name leased by mistake)",
    description:
      "Drops the shard from `GET /v1/shards` and the page. Its lease record stays in the store, so a later lease's token still climbs above every earlier one. Logged (`shard-forgotten`).",
    access: ADMIN,
    parameters: ["shard"],
    answers: {
      204: { description: "forgotten" },
      404: { description: "no listing holds the shard", codes: ["shard.not_found"] },
      409: {
        description: "defined (remove the definition first), carries nodes, or its lease is live",
        codes: ["shard.defined", "shard.carries_nodes", "lease.held"],
      },
    },
  },
} satisfies Record<string, Operation>;

/**
 * GET /v1/shards, answered like Ironic's ({"shards":[{"name","count"}]}, most nodes
 * first, unsharded nodes under "None"), plus what an operator needs at a glance: each
 * shard's active holder, its token, time left and since when, its description, and how
 * long the oldest trait change its holder has not acknowledged has waited (feed_lag_ms).
 * Defined or leased shards with no nodes are listed too (count 0): a definition nobody
 * uses, or a lease on a shard without nodes, is worth seeing.
 */
export function shardRoutes(store: Store, catalog: ShardCatalog, frontsIronic = false): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(SHARD_OPERATIONS.listShards, async (_req, res) => {
    const census = await leaseCensus(store, catalog);
    res.json({
      shards: await shardsOverview(store, catalog, census, seesTokens(principalOf(res))),
    } satisfies ShardList);
  });

  /**
   * GET /v1/shards/{shard}: one shard as an agent needs it before it serves it — its TTL,
   * who may serve it (null: any agent), its node count and live lease. 404 for a shard
   * that is neither defined nor carries nodes nor has lease state.
   */
  routes.serve(SHARD_OPERATIONS.getShard, async (req, res) => {
    const { shard } = parseOrThrow(ShardPath, req.params);
    const definition = catalog.get(shard);
    const [count, { current }, listed] = await Promise.all([
      store.nodes.countOf(shard),
      store.read(shard),
      store.isListed(shard),
    ]);
    if (definition === undefined && count === 0 && current === null && !listed) throw notFound(shard);
    const showTokens = seesTokens(principalOf(res));
    res.json({
      name: shard,
      defined: definition !== undefined,
      description: definition?.description ?? "",
      lease_ttl_ms: catalog.ttlMsFor(shard),
      agents: definition?.agents ?? null,
      // where the definition comes from (a file of this bridge, or the store), and whether
      // `migrate apply` is still filling it (its holder then stays in nova's legacy pool)
      defined_by: catalog.sourceOf(shard),
      filling: catalog.isFilling(shard),
      count,
      lease: current === null ? null : leaseJson(current, showTokens),
      // Where the holder's Ironic client points (with its token for {token}), when the
      // bridge fronts an Ironic: writes there pass only under the live lease.
      ironic_endpoint: frontsIronic ? `/fenced/${shard}/lease-{token}-{fence_key}/ironic` : null,
    } satisfies Shard);
  });

  /**
   * DELETE /v1/shards/{shard}: an operator's forgetting of a shard that was leased but
   * is neither defined nor carries nodes (a typo'd name, a rack gone for good), so it
   * leaves GET /v1/shards and the page. 204; 409 while it is defined, carries nodes or
   * its lease is live (each says what to do first); 404 when nothing lists it.
   */
  routes.serve(SHARD_OPERATIONS.forgetShard, async (req, res) => {
    const { shard } = parseOrThrow(ShardPath, req.params);
    const source = catalog.sourceOf(shard);
    if (source !== null)
      throw new HttpError([
        conflict(
          "shard.defined",
          "Shard still defined",
          source === "file"
            ? `shard ${shard} is defined by shards/${shard}.json on this bridge: remove the file first`
            : `shard ${shard} is defined in the store: DELETE /v1/shard-definitions/${shard} first`,
        ),
      ]);
    const count = await store.nodes.countOf(shard);
    if (count > 0)
      throw new HttpError([
        conflict(
          "shard.carries_nodes",
          "Shard carries nodes",
          `${count} nodes carry shard key ${shard}: move them to another shard first`,
        ),
      ]);
    const outcome = await store.forgetShard(shard);
    if (outcome.kind === "unknown") throw notFound(shard);
    if (outcome.kind === "held")
      throw new HttpError([
        conflict(
          "lease.held",
          "Shard still leased",
          `shard ${shard} is held by ${outcome.current.holder} for ${outcome.current.ttlMs} ms more: ` +
            `stop its agent (or let the lease end) first`,
          { retry_after_ms: outcome.current.ttlMs },
        ),
      ]);
    // The audit record: who forgot which shard, from where.
    logger.warn("shard-forgotten", {
      shard,
      role: principalOf(res).role,
      remote: req.socket.remoteAddress,
      request_id: res.locals.requestId,
    });
    res.status(204).end();
  });

  return routes;
}

function notFound(shard: string): HttpError {
  return new HttpError([
    {
      status: 404,
      code: "shardbridge.shard.not_found",
      title: "No such shard",
      detail: `shard ${shard} is not defined, carries no nodes and has no lease history`,
    },
  ]);
}
