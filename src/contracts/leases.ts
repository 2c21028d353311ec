import { z } from "zod";
import { FencingToken } from "../domain/lease.js";
import { AgentId, ShardName } from "../domain/names.js";
import { count, time } from "./fields.js";

/** A live lease; `token` null but for admin and the holder's own answers. */
export const Lease = z.strictObject({
  holder: AgentId,
  token: FencingToken.nullable(),
  ttl_ms: count,
  since: time,
});
export type Lease = z.infer<typeof Lease>;

/**
 * POST /v1/shards/{shard}/lease: granted or renewed. `waited_ms`: an acquire that waited
 * (`wait_ms`) was tried for the grant this long after it arrived.
 */
export const LeaseGrant = z.strictObject({
  shard: ShardName,
  holder: AgentId,
  token: FencingToken,
  ttl_ms: count,
  waited_ms: count.optional(),
});
export type LeaseGrant = z.infer<typeof LeaseGrant>;

/** GET /v1/shards/{shard}/lease: the live lease, or null; tokens null but for admin. */
export const LeaseState = z.strictObject({
  shard: ShardName,
  lease: Lease.nullable(),
  last_token: count.nullable(),
});
export type LeaseState = z.infer<typeof LeaseState>;

/** POST /v1/shards/{shard}/fence. */
export const FenceAnswer = z.strictObject({ allowed: z.boolean() });
export type FenceAnswer = z.infer<typeof FenceAnswer>;
