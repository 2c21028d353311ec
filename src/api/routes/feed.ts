import { Router, type Response } from "express";
import { ShardPath } from "../http/paths.js";
import { AckBody, ReadQuery, type FeedCursor } from "../../contracts/feed.js";
import { parseBoth } from "../../domain/validation.js";
import type { TraitService } from "../../traits/service.js";
import type { Store } from "../../store/store.js";
import { assertOwnLease, principalOf } from "../http/auth.js";
import { roleCheck } from "../openapi/operations.js";
import { bodyObject } from "../http/body.js";
import { conflict, HttpError } from "../http/errors.js";
import type { ShardCatalog } from "../../shards/definitions.js";
import { fenceServing } from "../../shards/revocation.js";

/**
 * Only the live holder of the shard's lease, presenting its current token, reads or
 * moves the shard's feed: a stale token is refused (409), another agent's live token too
 * (403), and neither changes anything.
 */
async function assertHolder(
  store: Store,
  catalog: ShardCatalog,
  res: Response,
  shard: string,
  token: number,
): Promise<void> {
  const fence = await fenceServing(store, catalog, { shard, token });
  if (!fence.allowed) {
    throw new HttpError([
      conflict(
        "lease.stale_token",
        "Not the shard's holder",
        `token ${token} does not hold shard ${shard} now`,
      ),
    ]);
  }
  assertOwnLease(principalOf(res), shard, fence.current);
}

/**
 *   GET  /v1/shards/{shard}/feed?token=T&limit=N  -> 200 {"shard","cursor","entries":[{"id","node","deltas","generation"}]}
 *   POST /v1/shards/{shard}/feed/ack  {"token","id"} -> 200 {"shard","cursor"} | 409 (no such entry)
 * The ordered feed of trait changes applied to the shard's nodes. The active agent reads
 * after the acknowledged cursor and acknowledges what it applied; after a failover the
 * new holder resumes from the last acknowledged entry, so no change is lost.
 */
export function feedRoutes(store: Store, catalog: ShardCatalog, traits: TraitService): Router {
  const router = Router();

  router.get("/v1/shards/:shard/feed", roleCheck("readFeed"), async (req, res) => {
    const [{ shard }, query] = parseBoth([ShardPath, req.params], [ReadQuery, req.query]);
    await assertHolder(store, catalog, res, shard, query.token);
    const { cursor, entries, resync } = await traits.readFeed(shard, query.limit);
    res.json({ shard, cursor, entries, ...(resync !== undefined && { resync }) });
  });

  router.post("/v1/shards/:shard/feed/ack", roleCheck("ackFeed"), async (req, res) => {
    const [{ shard }, body] = parseBoth([ShardPath, req.params], [AckBody, bodyObject(req)]);
    await assertHolder(store, catalog, res, shard, body.token);
    const cursor = await traits.ack(shard, body.id);
    if (cursor === null) {
      throw new HttpError([
        conflict(
          "feed.unknown_entry",
          "No such feed entry",
          `shard ${shard}'s feed has no entry ${body.id} after its cursor: acknowledge an id the feed delivered`,
          { field: "id" },
        ),
      ]);
    }
    res.json({ shard, cursor } satisfies FeedCursor);
  });

  return router;
}
