import { DeclaredRoutes } from "../http/declared-routes.js";
import type { Response } from "express";
import { ShardPath } from "../http/paths.js";
import { AckBody, ReadQuery, type FeedCursor, type FeedPage } from "../../contracts/feed.js";
import { parseBoth } from "../../core/validation.js";
import type { TraitService } from "../../bridge/trait-service.js";
import type { Store } from "../../store/store.js";
import { ownsLease, principalOf } from "../http/auth.js";
import { bodyObject } from "../http/body.js";
import { conflict, HttpError } from "../http/errors.js";
import type { ShardCatalog } from "../../bridge/shards/catalog.js";
import { fenceServing } from "../../bridge/shards/revocation.js";
import { LEASE_HOLDER, type Operation } from "../openapi/operation.js";

/**
 * Only the live holder of the shard's lease, presenting its current token, reads or
 * moves the shard's feed: any other token is refused (409), another agent's live token
 * alike (see ownsLease), and nothing changes.
 */
async function assertHolder(
  store: Store,
  catalog: ShardCatalog,
  res: Response,
  shard: string,
  token: number,
): Promise<void> {
  const fence = await fenceServing(store, catalog, { shard, token });
  if (!fence.allowed || !ownsLease(principalOf(res), fence.current)) {
    throw new HttpError([
      conflict(
        "lease.stale_token",
        "Not the shard's holder",
        `token ${token} is not this agent's live lease of shard ${shard}`,
      ),
    ]);
  }
}

/** The feed routes' operations, as the document lists them (operations.ts) and the role checks read them. */
export const FEED_OPERATIONS = {
  readFeed: {
    method: "get",
    path: "/v1/shards/{shard}/feed",
    id: "readFeed",
    tag: "traits",
    summary: "Trait changes of the shard's nodes after the acknowledged cursor (the live holder only)",
    description:
      "When entries after the cursor were trimmed away: `entries` empty and `resync` with every node's traits; apply them, then acknowledge `resume_after`.",
    access: LEASE_HOLDER,
    parameters: ["shard"],
    query: {
      schema: ReadQuery,
      describe: { token: "the caller's fencing token for the shard", limit: "entries at most" },
    },
    answers: {
      200: { description: "entries, oldest first, or a resync", schema: "FeedPage" },
      409: {
        description: "not the caller's live lease of the shard (another agent's live token alike)",
        codes: ["lease.stale_token"],
      },
    },
  },
  ackFeed: {
    method: "post",
    path: "/v1/shards/{shard}/feed/ack",
    id: "ackFeed",
    tag: "traits",
    summary: "Move the feed's cursor forward to an entry (never back)",
    access: LEASE_HOLDER,
    parameters: ["shard"],
    body: "FeedAck",
    answers: {
      200: { description: "the cursor now", schema: "FeedCursor" },
      409: {
        description:
          "not the caller's live lease of the shard (another agent's live token alike), or an id past the cursor that is no entry (`field: id`)",
        codes: ["lease.stale_token", "feed.unknown_entry"],
      },
    },
  },
} satisfies Record<string, Operation>;

/**
 *   GET  /v1/shards/{shard}/feed?token=T&limit=N  -> 200 {"shard","cursor","entries":[{"id","node","deltas","generation"}]}
 *   POST /v1/shards/{shard}/feed/ack  {"token","id"} -> 200 {"shard","cursor"} | 409 (no such entry)
 * The ordered feed of trait changes applied to the shard's nodes. The active agent reads
 * after the acknowledged cursor and acknowledges what it applied; after a failover the
 * new holder resumes from the last acknowledged entry, so no change is lost.
 */
export function feedRoutes(store: Store, catalog: ShardCatalog, traits: TraitService): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(FEED_OPERATIONS.readFeed, async (req, res) => {
    const [{ shard }, query] = parseBoth([ShardPath, req.params], [ReadQuery, req.query]);
    await assertHolder(store, catalog, res, shard, query.token);
    const { cursor, entries, resync } = await traits.readFeed(shard, query.limit);
    res.json({ shard, cursor, entries, ...(resync !== undefined && { resync }) } satisfies FeedPage);
  });

  routes.serve(FEED_OPERATIONS.ackFeed, async (req, res) => {
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

  return routes;
}
