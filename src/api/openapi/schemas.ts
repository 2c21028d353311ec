import { z } from "zod";
import { FencingToken } from "../../domain/lease.js";
import { AgentId, ShardName } from "../../domain/names.js";
import { BulkNodesRequest, NodeInput, NodePatch, NodeUuid } from "../../domain/node.js";
import { RingKindName } from "../../domain/ring.js";
import { HeartbeatRequest } from "../../store/store.js";
import { AckBody } from "../feed.js";
import { HeartbeatBody } from "../decode/heartbeat.js";
import { LeaseWriteBodies } from "../leases.js";
import { WebhookPayload } from "../decode/webhook.js";
import { TraitResetBody } from "../inspector.js";
import { CSP, LoginForm, SESSION_COOKIE, SESSION_MS, STATIC_TYPES, StaticPath } from "../ui/routes.js";
import { ShardDefinitionBody } from "../../shards/definitions.js";

/** A JSON Schema (2020-12, OpenAPI 3.1's dialect) as a plain object. */
export type JsonSchema = Record<string, unknown>;

/**
 * The JSON Schema of what `schema` accepts: the request as the client sends it (zod's
 * input side), so the document says what validation says. Refinements JSON Schema cannot
 * express (a shard not named "None", a trait os-traits knows) are left to the prose.
 */
export function fromZod(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io: "input" }) as JsonSchema;
  return json;
}

const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [schema, { type: "null" }] });
const strict = (properties: Record<string, JsonSchema>, optional: string[] = []): JsonSchema => ({
  type: "object",
  properties,
  required: Object.keys(properties).filter((key) => !optional.includes(key)),
  additionalProperties: false,
});
const count = { type: "integer", minimum: 0 };
const time = { type: "string", format: "date-time" };
const text = { type: "string" };
const listOf = (items: JsonSchema): JsonSchema => ({ type: "array", items });

const shard = fromZod(ShardName);
const agent = fromZod(AgentId);
const token = fromZod(FencingToken);
const nodeFields = fromZod(NodePatch).properties as Record<string, JsonSchema>;
/** A shard definition as the API shows it (src/api/definitions.ts). */
const definitionFields: Record<string, JsonSchema> = {
  name: shard,
  description: text,
  lease_ttl_ms: { type: "integer", minimum: 1000 },
  agents: nullable(listOf(agent)),
  filling: { type: "boolean" },
  source: { enum: ["file", "store"] },
};
/** Feed positions: `<ms>-<seq>`, as a Redis stream numbers its entries. */
const feedId = (fromZod(AckBody).properties as Record<string, JsonSchema>).id!;

/**
 * The schemas of the document's components: requests derived from the zod schemas the
 * routes validate with, answers written here (no zod schema builds them). Answers are
 * closed (additionalProperties false), so a field added to an answer without a word here
 * fails the contract test rather than go undocumented.
 */
export const SCHEMAS = {
  // ----- requests (from zod)
  LeaseAcquireOrRenew: fromZod(LeaseWriteBodies.acquire),
  LeaseRelease: fromZod(LeaseWriteBodies.release),
  FenceQuestion: fromZod(LeaseWriteBodies.fence),
  NodeInput: fromZod(NodeInput),
  NodePatch: fromZod(NodePatch),
  BulkNodes: fromZod(BulkNodesRequest),
  // The route requires `shards` and checks each name (HeartbeatBody pipes into ServedShards,
  // which fromZod describes by its input side): the names' schema is the Store's.
  Heartbeat: {
    ...fromZod(HeartbeatBody),
    properties: { shards: (fromZod(HeartbeatRequest).properties as Record<string, JsonSchema>).shards },
  },
  FeedAck: fromZod(AckBody),
  ShardDefinitionBody: fromZod(ShardDefinitionBody),
  WebhookPayload: fromZod(WebhookPayload),
  TraitReset: fromZod(TraitResetBody),
  LoginForm: fromZod(LoginForm),

  // ----- answers
  /** A live lease; `token` null but for admin and the holder's own answers. */
  Lease: strict({ holder: agent, token: nullable(token), ttl_ms: count, since: time }),
  /** `waited_ms`: an acquire that waited (`wait_ms`) was tried for the grant this long after it arrived */
  LeaseGrant: strict({ shard, holder: agent, token, ttl_ms: count, waited_ms: count }, ["waited_ms"]),
  LeaseState: strict({
    shard,
    lease: nullable({ $ref: "#/components/schemas/Lease" }),
    last_token: nullable(count),
  }),
  FenceAnswer: strict({ allowed: { type: "boolean" } }),
  ShardSummary: strict({
    // "None": the unsharded pool, as Ironic names it
    name: { anyOf: [shard, { const: "None" }] },
    count,
    description: text,
    lease: nullable({ $ref: "#/components/schemas/Lease" }),
    feed_lag_ms: nullable({ type: "number", minimum: 0 }),
  }),
  ShardList: strict({ shards: listOf({ $ref: "#/components/schemas/ShardSummary" }) }),
  Shard: strict({
    name: shard,
    defined: { type: "boolean" },
    description: text,
    lease_ttl_ms: { type: "integer", minimum: 1 },
    agents: nullable(listOf(agent)),
    defined_by: nullable({ enum: ["file", "store"] }),
    filling: { type: "boolean" },
    count,
    lease: nullable({ $ref: "#/components/schemas/Lease" }),
    ironic_endpoint: nullable(text),
  }),
  ShardDefinition: strict(definitionFields),
  ShardDefinitionWritten: strict({ ...definitionFields, takes_effect_within_ms: count }),
  ShardDefinitionList: strict({
    version: count,
    refresh_ms: count,
    definitions: listOf({ $ref: "#/components/schemas/ShardDefinition" }),
  }),
  Node: strict({ uuid: fromZod(NodeUuid), ...nodeFields }),
  NodeList: strict({ nodes: listOf({ $ref: "#/components/schemas/Node" }), next: nullable(text) }),
  BulkResult: strict({ created: count, updated: count }),
  AgentSeen: strict({ agent, last_seen: time, serves: listOf(shard) }),
  AgentSummary: strict({
    id: agent,
    // "": a holder that never sent a heartbeat (age_ms -1)
    last_seen: { anyOf: [time, { const: "" }] },
    age_ms: { type: "integer", minimum: -1 },
    up: { type: "boolean" },
    shards: listOf(shard),
    serves: listOf(shard),
    legacy_pool: { type: "boolean" },
  }),
  AgentList: strict({
    agents: listOf({ $ref: "#/components/schemas/AgentSummary" }),
    down_after_ms: count,
  }),
  AgentNodes: strict({
    agent,
    leases: listOf(strict({ shard, holder: agent, token, ttl_ms: count, since: time })),
    legacy: strict({
      pool_member: { type: "boolean" },
      ring: fromZod(RingKindName),
      members: listOf(text),
      built_at: nullable(time),
    }),
    nodes: listOf(
      strict({
        uuid: fromZod(NodeUuid),
        ...nodeFields,
        token: nullable(token),
        via: { enum: ["lease", "instance", "ring"] },
      }),
    ),
  }),
  NodeTraits: strict({
    node: fromZod(NodeUuid),
    generation: count,
    traits: listOf(strict({ name: text, owner: text })),
  }),
  TraitsReset: strict({
    node: fromZod(NodeUuid),
    generation: count,
    applied: listOf({ type: "string", pattern: "^-" }),
    forgotten: { type: "object", additionalProperties: count },
  }),
  TraitsApplied: strict({
    node: fromZod(NodeUuid),
    generation: count,
    applied: listOf({ type: "string", pattern: "^[+-]" }),
  }),
  FeedPage: strict(
    {
      shard,
      cursor: nullable(feedId),
      entries: listOf(
        strict(
          {
            id: feedId,
            node: fromZod(NodeUuid),
            deltas: listOf({ type: "string", pattern: "^[+-]" }),
            generation: count,
            snapshot: { const: true },
          },
          ["snapshot"],
        ),
      ),
      resync: strict({
        reason: text,
        resume_after: nullable(feedId),
        nodes: listOf(strict({ node: fromZod(NodeUuid), traits: listOf(text), generation: count })),
      }),
    },
    ["resync"],
  ),
  FeedCursor: strict({ shard, cursor: nullable(feedId) }),
  IronicDelivery: {
    oneOf: [
      strict({ configured: { const: false } }),
      strict({
        configured: { const: true },
        durable: { type: "boolean" },
        pending_changes: count,
        oldest_pending_ms: { type: "number", minimum: 0 },
        batches: strict({ delivered: count, retried: count, given_up: count }),
        coalesced_changes: count,
        queue: strict({
          partitions: count,
          partition_bound: count,
          queued_batches: count,
          folded_nodes: count,
        }),
        live_bridges: count,
        this_bridge: strict({
          worker: text,
          partitions: { type: "array", items: count },
          delivered: count,
          retried: count,
          given_up: count,
          calls_in_flight: count,
        }),
        undeliverable: {
          type: "array",
          items: strict({ node: text, changes: { type: "array", items: text }, reason: text, at: time }),
        },
      }),
    ],
  },
  Health: strict({ status: { const: "ok" }, version: text, commit: nullable(text) }),
  Ready: strict({
    status: { const: "ready" },
    store: { enum: ["memory", "redis"] },
    version: text,
    commit: nullable(text),
  }),
  NotReady: strict({
    status: { const: "store unreachable" },
    store: { enum: ["memory", "redis"] },
    error: text,
    version: text,
    commit: nullable(text),
  }),
  /** One error in the OpenStack API-SIG shape; a validation error names its field. */
  ApiError: {
    ...strict(
      {
        status: { type: "integer", minimum: 400, maximum: 599 },
        code: { type: "string", pattern: "^shardbridge\\." },
        title: text,
        detail: text,
        field: text,
        lease: nullable({ $ref: "#/components/schemas/Lease" }),
        retry_after_ms: count,
        waited_ms: count,
      },
      ["field", "lease", "retry_after_ms", "waited_ms"],
    ),
    if: { type: "object", properties: { code: { const: "shardbridge.validation" } } },
    then: { type: "object", properties: { field: text }, required: ["field"] },
  },
  /** Every refusal: `{"errors":[…]}`, the first error's status the answer's. */
  Error: strict({ errors: { ...listOf({ $ref: "#/components/schemas/ApiError" }), minItems: 1 } }),
  /** Ironic's own error body, as the fenced endpoint passes it on (`error_message`: JSON as a string). */
  IronicError: {
    type: "object",
    properties: { error_message: text },
    required: ["error_message"],
  },
} satisfies Record<string, JsonSchema>;

/** Path parameters, each with the zod schema the route checks it with and an example the tests use. */
export const PARAMETERS = {
  shard: {
    name: "shard",
    in: "path",
    required: true,
    description:
      "A shard key (nova's `[ironic] shard`); never \"None\", Ironic's name for the unsharded pool.",
    schema: shard,
    example: "rack-a",
  },
  uuid: {
    name: "uuid",
    in: "path",
    required: true,
    description: "A node's UUID (stored lower case).",
    schema: fromZod(NodeUuid),
    example: "8f6c2a38-0d4e-4a51-9a53-2c1f5f1d7e01",
  },
  agent: {
    name: "id",
    in: "path",
    required: true,
    description: "An agent id: the nova-compute `host`.",
    schema: agent,
    example: "compute-0",
  },
  fencedShard: {
    name: "shard",
    in: "path",
    required: true,
    description: "The shard whose lease fences the writes.",
    schema: shard,
    example: "rack-a",
  },
  fencedToken: {
    name: "token",
    in: "path",
    required: true,
    description: "The fencing token the caller holds the shard under (after `lease-`).",
    schema: token,
    example: 1,
  },
  ironicPath: {
    name: "ironic_path",
    in: "path",
    required: true,
    description: "Ironic's own API path, slashes included (`v1/nodes/{node}/states/power`).",
    schema: text,
    example: "v1/nodes",
    // Path parameters stop at a slash; this one is the rest of the path (a client or test that
    // matches paths against the document reads this mark).
    "x-shardbridge-rest-of-path": true,
  },
  file: {
    name: "file",
    in: "path",
    required: true,
    description: `One of the page's files: ${Object.keys(STATIC_TYPES).join(", ")}.`,
    schema: (fromZod(StaticPath).properties as Record<string, JsonSchema>).file,
    example: "status.js",
  },
} as const;

export const HEADERS = {
  RequestId: {
    description:
      "The request's id: the client's `X-Request-Id` when it is 1..128 printable ASCII characters without spaces, else a fresh UUID. The bridge's log carries it.",
    required: true,
    schema: text,
  },
  WwwAuthenticate: {
    description:
      'The bearer challenge: `Bearer realm="shardbridge"` (with `error="invalid_token"` for an unknown token).',
    required: true,
    schema: text,
  },
  /** the webhook's 401: a challenge only when the bearer token is at fault, not the signature */
  WwwAuthenticateBearerOnly: {
    description: "The bearer challenge, when the bearer token is at fault (not for a signature refusal).",
    schema: text,
  },
  /** what POST /ui/login sets: the session, for the page's paths only, out of scripts' reach */
  SetPageSession: {
    description: `The page session: \`${SESSION_COOKIE}=<id>.<expiry>.<mac>; Path=/ui; Max-Age=${SESSION_MS / 1000}; HttpOnly; SameSite=Strict\`, with \`; Secure\` when \`X-Forwarded-Proto: https\` says a TLS proxy serves the page.`,
    required: true,
    schema: {
      type: "string",
      pattern: `^${SESSION_COOKIE}=[A-Za-z0-9_-]+\\.\\d+\\.[A-Za-z0-9_-]+; Path=/ui; Max-Age=${SESSION_MS / 1000}; HttpOnly; SameSite=Strict(; Secure)?$`,
    },
  },
  ClearPageSession: {
    description: "The page session's cookie, emptied and expired.",
    required: true,
    schema: { const: `${SESSION_COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict` },
  },
  /** every /ui answer's, with X-Content-Type-Options, X-Frame-Options and Referrer-Policy */
  ContentSecurityPolicy: {
    description:
      "The page's policy: scripts, styles and images from its own files only, no frames. Sent with `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`, `Referrer-Policy: same-origin` (so the page's own forms carry its origin, and `Origin: null` means a page that is not the bridge's).",
    required: true,
    schema: { const: CSP },
  },
  Replay: {
    description:
      "`true` when this answer is the first answer to a delivery id seen before; nothing was applied again.",
    schema: { const: "true" },
  },
} as const;

export const SECURITY_SCHEMES = {
  bearer: {
    type: "http",
    scheme: "bearer",
    description:
      "A token from the bridge's tokens file (`--tokens FILE`), each with one role: `admin`, `inspector`, " +
      "`agent` bound to one agent id, or `viewer` (reads only: any method but GET and HEAD is 403 before " +
      "the body is read). Each operation's security requirement lists the roles it takes " +
      "(OpenAPI 3.1: role names for a scheme that is not OAuth).",
  },
  pageSession: {
    type: "apiKey",
    in: "cookie",
    name: SESSION_COOKIE,
    description:
      "The status page's session, set by `POST /ui/login` for a `viewer`'s or `admin`'s token (the roles in each requirement): " +
      "a signed expiry holding no token, good for the `/ui` routes only.",
  },
  webhookSignature: {
    type: "apiKey",
    in: "header",
    name: "X-Shardbridge-Signature",
    description:
      '`sha256=<hex HMAC-SHA256(secret, "<timestamp>\\n<X-Shardbridge-Delivery, or empty>\\n<raw body>")>`, the secret from `--inspector-secret`.',
  },
  webhookTimestamp: {
    type: "apiKey",
    in: "header",
    name: "X-Shardbridge-Timestamp",
    description: "Unix seconds when the delivery was signed; refused outside ±300 s of the bridge's clock.",
  },
} as const;
