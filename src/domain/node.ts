import { z } from "zod";
import { AgentId, ShardName } from "./names.js";
import { uniqueField } from "./validation.js";

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A node UUID in canonical form (lower case), as Ironic stores it. */
export const NodeUuid = z
  .string({ error: "must be a string" })
  .regex(UUID_PATTERN, { error: "must be a UUID (8-4-4-4-12 hex digits)" })
  .transform((uuid) => uuid.toLowerCase());

/** Ironic's logical node names: RFC 3986 unreserved characters, at most 255. */
export const NodeName = z
  .string({ error: "must be a string" })
  .regex(/^[A-Za-z0-9\-._~]{1,255}$/, { error: "must be 1..255 of A-Z a-z 0-9 - . _ ~" });

/** Ironic's conductor groups: case-insensitive, stored lower case, empty by default. */
export const ConductorGroup = z
  .string({ error: "must be a string" })
  .regex(/^[a-zA-Z0-9_.-]{0,255}$/, { error: "must be 0..255 of a-z 0-9 _ . -" })
  .transform((group) => group.toLowerCase());

/** A node as a client sends it; `uuid` may come from the path instead. */
export const NodeInput = z.strictObject({
  uuid: NodeUuid.optional(),
  name: NodeName.nullable().default(null),
  shard: ShardName.nullable().default(null),
  conductor_group: ConductorGroup.default(""),
  instance_host: AgentId.nullable().default(null),
});

/** A node as the bridge keeps it: in exactly one place, one shard or the unsharded pool. */
export interface BareMetalNode {
  uuid: string;
  name: string | null;
  shard: string | null;
  conductor_group: string;
  /**
   * The compute host (agent id) whose instance is deployed on the node, if any. Nova keeps
   * such a node with that host whatever the ring says; Ironic knows only `instance_uuid`,
   * so whoever knows the host (nova, an operator) sets it.
   */
  instance_host: string | null;
}

/** Most nodes one bulk request may carry (100,000-node fleets load in a few calls). */
export const BULK_MAX_NODES = 20_000;

/** Nodes with their uuids: at least one, at most `max`, no uuid twice (a bulk body, an inventory file). */
export function nodeList(max: number) {
  return z
    .array(NodeInput.extend({ uuid: NodeUuid }))
    .min(1, { error: "must hold at least one node" })
    .max(max, { error: `must hold at most ${max} nodes` })
    .superRefine(uniqueField("nodes", "uuid", (node) => node.uuid));
}

export const BulkNodesRequest = z.strictObject({ nodes: nodeList(BULK_MAX_NODES) });

/** List filters, Ironic style: `?shard=a,b`, `?sharded=true|false`, `?limit=`, `?marker=`. */
export const NodeListQuery = z.strictObject({
  shard: z
    .string()
    .transform((list) => list.split(","))
    .pipe(z.array(ShardName).max(100, { error: "at most 100 shards" }))
    .optional(),
  sharded: z
    .enum(["true", "false"], { error: "must be true or false" })
    .transform((v) => v === "true")
    .optional(),
  limit: z.coerce
    .number({ error: "must be a number" })
    .int()
    .min(1)
    .max(10_000, { error: "must be at most 10000" })
    .default(1000),
  marker: NodeUuid.optional(),
});
export type NodeListQuery = z.output<typeof NodeListQuery>;
