import { z } from "zod";
import { FencingToken } from "../core/lease/bounds.js";
import { ShardName } from "../core/names.js";
import { NodeUuid } from "../core/node.js";
import { wholeNumber } from "./fields.js";

/**
 * A feed position: `<ms>-<seq>`, as a Redis stream numbers its entries. Bounded so every
 * id is a valid stream id and compares exactly as a Lua number.
 */
export const FeedId = z.string().regex(/^\d{1,15}-\d{1,15}$/, { error: "must be a feed id (<ms>-<seq>)" });

/** GET /v1/shards/{shard}/feed?token=&limit=. */
export const ReadQuery = z.strictObject({
  token: z.coerce.number({ error: "must be a number" }).pipe(FencingToken),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

/** POST /v1/shards/{shard}/feed/ack. */
export const AckBody = z.strictObject({ token: FencingToken, id: FeedId });

/** GET /v1/shards/{shard}/feed: entries after the cursor, or a resync when some were trimmed. */
export const FeedPage = z.strictObject({
  shard: ShardName,
  cursor: FeedId.nullable(),
  entries: z.array(
    z.strictObject({
      id: FeedId,
      node: NodeUuid,
      deltas: z.array(z.string().regex(/^[+-]/)),
      generation: wholeNumber,
      snapshot: z.literal(true).optional(),
    }),
  ),
  resync: z
    .strictObject({
      reason: z.string(),
      resume_after: FeedId.nullable(),
      nodes: z.array(
        z.strictObject({ node: NodeUuid, traits: z.array(z.string()), generation: wholeNumber }),
      ),
    })
    .optional(),
});
export type FeedPage = z.infer<typeof FeedPage>;

/** POST /v1/shards/{shard}/feed/ack: the cursor now. */
export const FeedCursor = z.strictObject({ shard: ShardName, cursor: FeedId.nullable() });
export type FeedCursor = z.infer<typeof FeedCursor>;
