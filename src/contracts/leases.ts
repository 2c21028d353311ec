import { z } from "zod";
import { FenceKey, FenceRequest, FencingToken, ReleaseRequest, RenewRequest } from "../core/lease/bounds.js";
import { AgentId, ShardName } from "../core/names.js";
import { wholeNumber, time } from "./fields.js";

/** The longest wait a request may ask for: a standby asks again after it, whatever happened. */
export const LEASE_WAIT_MAX_MS = 30_000;

/** How long an acquire may wait for the lease (see shards/lease-waits.ts): the route's own field. */
export const WaitMs = z
  .number()
  .int()
  .min(0)
  .max(LEASE_WAIT_MAX_MS)
  .describe(
    "acquire only: wait up to this long for the lease to be released, expire or be taken back, " +
      "and be granted then (0, the default: answer at once)",
  );

/**
 * The body of each lease write: the fields of the Store's request a caller sends (the
 * path gives the shard, the catalog the TTL). The Store's parse validates them; these
 * say which fields a body may hold, and describe the bodies in the OpenAPI document.
 */
export const LeaseWriteBodies = {
  /** acquire without `token` (waiting up to `wait_ms` for the lease), renew with it */
  acquire: RenewRequest.pick({ agent: true, token: true })
    .partial({ token: true })
    .extend({ wait_ms: WaitMs.optional() }),
  release: ReleaseRequest.pick({ agent: true, token: true }),
  fence: FenceRequest.pick({ token: true }),
};

/** A live lease; `token` null but for admin and the holder's own answers. */
export const Lease = z.strictObject({
  holder: AgentId,
  token: FencingToken.nullable(),
  ttl_ms: wholeNumber,
  since: time,
});
export type Lease = z.infer<typeof Lease>;

/**
 * POST /v1/shards/{shard}/lease: granted or renewed. `fence_key`: an acquire's grant only,
 * the lease's key for the fenced Ironic endpoint (answered this once; the store keeps its
 * digest). `waited_ms`: an acquire that waited (`wait_ms`) was tried for the grant this
 * long after it arrived.
 */
export const LeaseGrant = z.strictObject({
  shard: ShardName,
  holder: AgentId,
  token: FencingToken,
  ttl_ms: wholeNumber,
  fence_key: FenceKey.optional(),
  waited_ms: wholeNumber.optional(),
});
export type LeaseGrant = z.infer<typeof LeaseGrant>;

/** GET /v1/shards/{shard}/lease: the live lease, or null; tokens null but for admin. */
export const LeaseState = z.strictObject({
  shard: ShardName,
  lease: Lease.nullable(),
  last_token: wholeNumber.nullable(),
});
export type LeaseState = z.infer<typeof LeaseState>;

/** POST /v1/shards/{shard}/fence. */
export const FenceAnswer = z.strictObject({ allowed: z.boolean() });
export type FenceAnswer = z.infer<typeof FenceAnswer>;
