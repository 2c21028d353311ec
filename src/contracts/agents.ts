import { z } from "zod";
import { FencingToken } from "../core/lease/bounds.js";
import { AgentId, HeartbeatInstance, ServedShards, ShardName } from "../core/names.js";
import { RingKindName } from "../core/ring/kinds.js";
import { wholeNumber, time } from "./fields.js";
import { Node } from "./nodes.js";

/**
 * A heartbeat's body. `shards` must be given: [] puts the agent in nova's legacy ring
 * pool, so a body left empty by accident must not (the ring would hand a sharded agent
 * unsharded nodes).
 */
export const HeartbeatBody = z.strictObject({
  shards: z
    .array(z.unknown(), {
      error: (issue) =>
        issue.input === undefined
          ? "is required: the shards this agent serves ([] for nova's legacy ring pool)"
          : "must be a list of shard names",
    })
    .pipe(ServedShards),
  /** which process of the agent sends it (see HeartbeatInstance); left out: the one slot of senders that name none */
  instance: HeartbeatInstance.optional(),
});

/** GET /v1/agents/{id}/nodes?token=: the fencing tokens the agent holds. */
export const NodesQuery = z.strictObject({
  token: z
    .string({ error: "must be a comma-separated list of fencing tokens" })
    // Empty: the agent holds no lease (a legacy pool member asking for its ring's nodes).
    .transform((list) => (list === "" ? [] : list.split(",").map(Number)))
    .pipe(z.array(FencingToken).max(1000))
    .optional(),
});

/** POST /v1/agents/{id}/heartbeat: recorded. */
export const AgentSeen = z.strictObject({ agent: AgentId, last_seen: time, serves: z.array(ShardName) });
export type AgentSeen = z.infer<typeof AgentSeen>;

/** One row of GET /v1/agents. */
export const AgentSummary = z.strictObject({
  id: AgentId,
  // "": a holder that never sent a heartbeat (age_ms -1)
  last_seen: z.union([time, z.literal("")]),
  age_ms: z.int().min(-1),
  up: z.boolean(),
  shards: z.array(ShardName),
  serves: z.array(ShardName),
  legacy_pool: z.boolean(),
});
export type AgentSummary = z.infer<typeof AgentSummary>;

/** GET /v1/agents. */
export const AgentList = z.strictObject({ agents: z.array(AgentSummary), down_after_ms: wholeNumber });
export type AgentList = z.infer<typeof AgentList>;

/** GET /v1/agents/{id}/nodes: the agent's leases, its part of nova's ring, and its nodes. */
export const AgentNodes = z.strictObject({
  agent: AgentId,
  leases: z.array(
    z.strictObject({
      shard: ShardName,
      holder: AgentId,
      token: FencingToken,
      ttl_ms: wholeNumber,
      since: time,
    }),
  ),
  legacy: z.strictObject({
    pool_member: z.boolean(),
    ring: RingKindName,
    members: z.array(z.string()),
    built_at: time.nullable(),
  }),
  /** `via`: "lease" (a shard it holds; `token` is the fencing token), "instance" or "ring" (unsharded, no token) */
  nodes: z.array(
    Node.extend({
      token: FencingToken.nullable(),
      via: z.enum(["lease", "instance", "ring"]),
    }),
  ),
});
export type AgentNodes = z.infer<typeof AgentNodes>;
