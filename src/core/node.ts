import { z } from "zod";
import { AgentId, ShardName } from "./names.js";
import { uniqueField } from "./validation.js";

// Both cases spelt out rather than an i flag: a JSON Schema pattern (the OpenAPI document) has no flags.
const UUID_PATTERN = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** A node UUID in canonical form (lower case), as Ironic stores it. */
export const NodeUuid = z
  .string({ error: "must be a string" })
  .regex(UUID_PATTERN, { error: "must be a UUID (8-4-4-4-12 hex digits)" })
  .transform((uuid) => uuid.toLowerCase());

/** The `{uuid}` of a node's path (every node route checks it so). */
export const NodePath = z.strictObject({ uuid: NodeUuid });

/** Ironic's logical node names: RFC 3986 unreserved characters, at most 255. */
export const NodeName = z
  .string({ error: "must be a string" })
  .regex(/^[A-Za-z0-9\-._~]{1,255}$/, { error: "must be 1..255 of A-Z a-z 0-9 - . _ ~" });

/** Ironic's conductor groups: case-insensitive, stored lower case, empty by default. */
export const ConductorGroup = z
  .string({ error: "must be a string" })
  .regex(/^[a-zA-Z0-9_.-]{0,255}$/, { error: "must be 0..255 of a-z 0-9 _ . -" })
  .transform((group) => group.toLowerCase());

/**
 * A field a whole node must carry: left out, it is refused, never defaulted. A default is
 * what moved a node out of its shard (to nova's ring) when a client sent an empty body.
 * A transform ahead of `schema` (not a refinement of z.unknown()): a JSON Schema of the
 * request's input then shows `schema` itself, as the API's OpenAPI document derives it.
 */
function given<T extends z.ZodType>(schema: T, none: string) {
  return z
    .transform((value: unknown, ctx): unknown => {
      if (value !== undefined) return value;
      ctx.issues.push({ code: "custom", message: `is required (${none})`, input: value });
      return z.NEVER;
    })
    .pipe(schema);
}

/** The fields of a node a client sets, each as it must look. */
const NodeFields = {
  name: NodeName.nullable(),
  shard: ShardName.nullable(),
  conductor_group: ConductorGroup,
  instance_host: AgentId.nullable(),
};

/**
 * A whole node, as PUT and each item of a bulk send it: every field given (null where it
 * has none, "" for the default conductor group), so a field left out by accident is a
 * 400, not a reset. `uuid` may come from the path instead. To change some fields only,
 * PATCH (`NodePatch`).
 */
export const NodeInput = z.strictObject({
  uuid: NodeUuid.optional(),
  name: given(NodeFields.name, "null for none"),
  shard: given(NodeFields.shard, "null for the unsharded pool"),
  conductor_group: given(NodeFields.conductor_group, '"" for the default group'),
  instance_host: given(NodeFields.instance_host, "null when no instance is deployed"),
});

/**
 * A change to some fields of an existing node (JSON merge patch, RFC 7396): the fields
 * given replace the stored ones, null clears one, the rest stay as they are.
 */
export const NodePatch = z.strictObject({
  name: NodeFields.name.optional(),
  shard: NodeFields.shard.optional(),
  conductor_group: NodeFields.conductor_group.optional(),
  instance_host: NodeFields.instance_host.optional(),
});
export type NodePatch = z.output<typeof NodePatch>;

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

/**
 * `node` as one literal of its five fields, in one order: every node built here shares one
 * hidden class. A node kept for long (the embedded store keeps 100,000) must be built so:
 * on Node 20's V8 a spread (`{ ...node }`) gives nearly every copy a hidden class of its
 * own, which in a 100,000-node store was 23 MB of the 68 MB heap (a map and a descriptor
 * array per node), 200,000 more objects for every full GC to mark, and megamorphic reads
 * of every node listed (docs/ARCHITECTURE.md, One event loop).
 */
export function nodeRecord(node: BareMetalNode): BareMetalNode {
  return {
    uuid: node.uuid,
    name: node.name,
    shard: node.shard,
    conductor_group: node.conductor_group,
    instance_host: node.instance_host,
  };
}

/** Most nodes one bulk request may carry (100,000-node fleets load in a few calls). */
export const BULK_MAX_NODES = 20_000;

/** Nodes with their uuids: at least one, at most `max`, no uuid twice. */
function nodeList<T extends z.ZodType<{ uuid: string; name?: string | null | undefined }>>(
  item: T,
  max: number,
) {
  return (
    z
      .array(item)
      .min(1, { error: "must hold at least one node" })
      .max(max, { error: `must hold at most ${max} nodes` })
      .check(uniqueField("nodes", "uuid", (node: { uuid: string }) => node.uuid))
      // Ironic's node names are unique: a list naming two nodes alike cannot be Ironic's.
      .check(uniqueField("nodes", "name", (node: { name?: string | null }) => node.name ?? null))
  );
}

/** A bulk upsert: whole nodes, each as PUT takes it, with its uuid. */
export const BulkNodesRequest = z.strictObject({
  nodes: nodeList(NodeInput.extend({ uuid: NodeUuid }), BULK_MAX_NODES),
});

/**
 * An inventory file for planning (`compare`, `migrate plan`): nodes as the bulk body
 * lists them, but fields left out take their defaults — planning writes nothing — and
 * without the bulk bound.
 */
export const InventoryFile = z.strictObject({
  nodes: nodeList(
    z.strictObject({
      uuid: NodeUuid,
      name: NodeFields.name.default(null),
      shard: NodeFields.shard.default(null),
      conductor_group: NodeFields.conductor_group.default(""),
      instance_host: NodeFields.instance_host.default(null),
    }),
    Number.MAX_SAFE_INTEGER,
  ),
});

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
    .int({ error: "must be a whole number" })
    .min(1, { error: "must be at least 1" })
    .max(10_000, { error: "must be at most 10000" })
    .default(1000),
  marker: NodeUuid.optional(),
});
export type NodeListQuery = z.output<typeof NodeListQuery>;
