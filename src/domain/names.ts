import { z } from "zod";

/** Shard names follow nova's rule for `[ironic] shard`: a safe charset, at most 255 chars. */
export const SHARD_NAME_PATTERN = /^[a-zA-Z0-9_.-]{1,255}$/;

export const ShardName = z
  .string({ error: "must be a string" })
  .regex(SHARD_NAME_PATTERN, { error: "must match ^[a-zA-Z0-9_.-]{1,255}$" })
  // Ironic lists unsharded nodes under the shard name "None"; a real shard of that name
  // would be indistinguishable from them.
  .refine((name) => name !== "None", { error: 'must not be "None": that names the unsharded nodes' });

/**
 * An agent id is the nova-compute `host`: any printable text, 1..255 chars. Control
 * characters are refused because ids end up in logs and Redis keys.
 */
export const AgentId = z
  .string({ error: "must be a string" })
  .min(1, { error: "must not be empty" })
  .max(255, { error: "must be at most 255 characters" })
  // eslint-disable-next-line no-control-regex
  .regex(/^[^\u0000-\u001f\u007f]*$/, { error: "must not contain control characters" });

/** The most shards one agent may say it serves (a heartbeat's `shards`). */
export const MAX_SERVED_SHARDS = 1000;

/**
 * The shards an agent says it serves, each a shard name. The bound is checked before any
 * name: a longer list is refused in one step, not name by name.
 */
export const ServedShards = z
  .array(ShardName)
  .max(MAX_SERVED_SHARDS, { error: `must name at most ${MAX_SERVED_SHARDS} shards` });

export type ShardName = z.infer<typeof ShardName>;
export type AgentId = z.infer<typeof AgentId>;

/**
 * nova's `[DEFAULT] host` for the nova-compute that serves `shard`, unless told otherwise:
 * synthetic and the same wherever the shard's active runs (nova's ironic-shards spec:
 * "a synthetic `[DEFAULT]host` value that matches the shard key"). `shardbridge run`
 * gives it to its child; `migrate plan` prints it.
 */
export const novaHostFor = (shard: string): string => `${shard}-ironic`;
