import { z } from "zod";
import { AgentId, ShardName } from "../names.js";

/** Lease TTL bounds and default, in milliseconds (issue: default 6 s, 1 s..300 s). */
export const LEASE_TTL_MIN_MS = 1_000;
export const LEASE_TTL_MAX_MS = 300_000;
export const LEASE_TTL_DEFAULT_MS = 6_000;

/** Agents renew every TTL/3 and stop acting 2/3 TTL after the last renew they sent. */
export const renewIntervalMs = (ttlMs: number): number => Math.floor(ttlMs / 3);
export const renewDeadlineMs = (ttlMs: number): number => Math.floor((2 * ttlMs) / 3);

/**
 * The least lease a write through the fenced endpoint must find left, for a lease of
 * `ttlMs`: what a healthy holder always has. It renews every TTL/3 and stops acting at 2/3
 * TTL after the last renew it sent, and the store counts the TTL from no earlier than that
 * send, so while the holder may act the store's lease has at least TTL/3 left. Less means
 * the writer's renew is late (its process or the bridge busy) or it is past its own
 * deadline (frozen, then resumed): see src/bridge/shards/write-margin.ts.
 */
export const fenceMarginMs = (ttlMs: number): number => ttlMs - renewDeadlineMs(ttlMs);

export const LeaseTtlMs = z
  .number({ error: "must be a number of milliseconds" })
  .int({ error: "must be a whole number of milliseconds" })
  .min(LEASE_TTL_MIN_MS, { error: `must be at least ${LEASE_TTL_MIN_MS} ms` })
  .max(LEASE_TTL_MAX_MS, { error: `must be at most ${LEASE_TTL_MAX_MS} ms` });

/**
 * Fencing tokens are positive integers below 2^53 so they survive JSON, Lua doubles
 * and Redis integer replies without rounding.
 */
export const FencingToken = z
  .number({ error: "must be a number" })
  .int({ error: "must be an integer" })
  .positive({ error: "must be positive" })
  .max(Number.MAX_SAFE_INTEGER, { error: "must be below 2^53" });

/**
 * A lease's fence key: 128 random bits in lower-case hex, minted with each grant and
 * answered only to the agent granted it. The fencing token orders leases and is no secret
 * (it follows the lease's start time, which every role sees); the key is what a caller
 * without a bearer token — nova-compute through the fenced Ironic endpoint — proves it
 * holds the live lease with.
 */
export const FenceKey = z
  .string({ error: "must be a string" })
  .regex(/^[0-9a-f]{32}$/, { error: "must be 32 lower-case hex digits" });

export const AcquireRequest = z.strictObject({
  shard: ShardName,
  agent: AgentId,
  ttlMs: LeaseTtlMs.default(LEASE_TTL_DEFAULT_MS),
});

export const RenewRequest = z.strictObject({
  shard: ShardName,
  agent: AgentId,
  token: FencingToken,
  ttlMs: LeaseTtlMs.default(LEASE_TTL_DEFAULT_MS),
});

export const ReleaseRequest = z.strictObject({
  shard: ShardName,
  agent: AgentId,
  token: FencingToken,
});

export const FenceRequest = z.strictObject({
  shard: ShardName,
  token: FencingToken,
  /** the lease's fence key: when given, only the lease minted with it passes */
  fenceKey: FenceKey.optional(),
});

export type AcquireRequest = z.input<typeof AcquireRequest>;
export type RenewRequest = z.input<typeof RenewRequest>;
export type ReleaseRequest = z.input<typeof ReleaseRequest>;
export type FenceRequest = z.input<typeof FenceRequest>;
