import { z } from "zod";
import { FenceKey, FencingToken } from "../../core/lease/bounds.js";
import { AgentId, ShardName } from "../../core/names.js";
import { BulkNodesRequest, NodeInput, NodePatch, NodeUuid } from "../../core/node.js";
import { HeartbeatRequest } from "../../store/store.js";
import { LoginForm, StaticPath } from "../../contracts/ui.js";
import { CSP, SESSION_COOKIE, SESSION_MS, STATIC_TYPES } from "../ui/routes.js";
import * as agents from "../../contracts/agents.js";
import * as errors from "../../contracts/errors.js";
import * as feed from "../../contracts/feed.js";
import * as health from "../../contracts/health.js";
import * as ironic from "../../contracts/ironic.js";
import * as leases from "../../contracts/leases.js";
import * as nodes from "../../contracts/nodes.js";
import * as shards from "../../contracts/shards.js";
import * as traits from "../../contracts/traits.js";

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

const text = { type: "string" };
const shard = fromZod(ShardName);
const agent = fromZod(AgentId);
const token = fromZod(FencingToken);

/** The answers' zod schemas (src/contracts/), each under its component's name. */
export const ANSWERS = {
  Lease: leases.Lease,
  LeaseGrant: leases.LeaseGrant,
  LeaseState: leases.LeaseState,
  FenceAnswer: leases.FenceAnswer,
  ShardSummary: shards.ShardSummary,
  ShardList: shards.ShardList,
  Shard: shards.Shard,
  ShardDefinition: shards.ShardDefinition,
  ShardDefinitionWritten: shards.ShardDefinitionWritten,
  ShardDefinitionList: shards.ShardDefinitionList,
  Node: nodes.Node,
  NodeList: nodes.NodeList,
  BulkResult: nodes.BulkResult,
  AgentSeen: agents.AgentSeen,
  AgentSummary: agents.AgentSummary,
  AgentList: agents.AgentList,
  AgentNodes: agents.AgentNodes,
  NodeTraits: traits.NodeTraits,
  TraitsReset: traits.TraitsReset,
  TraitsApplied: traits.TraitsApplied,
  FeedPage: feed.FeedPage,
  FeedCursor: feed.FeedCursor,
  IronicDelivery: ironic.IronicDelivery,
  Health: health.Health,
  Ready: health.Ready,
  NotReady: health.NotReady,
  ApiError: errors.ApiError,
  Error: errors.ErrorBody,
  IronicError: ironic.IronicErrorBody,
} satisfies Record<string, z.ZodType>;
export type AnswerName = keyof typeof ANSWERS;

/**
 * The answers as JSON Schema, as the server writes them. One registry of them all, so an
 * answer holding another (a lease in a shard) refers to its component rather than repeat it.
 * Converted on the input side, as requests are: a node's uuid is the pattern it must match
 * (the transform that lower-cases it has no JSON Schema).
 */
function answerSchemas(): Record<AnswerName, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(ANSWERS)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    io: "input",
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<AnswerName, JsonSchema> };
  const answers = Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _dialect, $id: _id, ...json }]) => [id, json]),
  ) as Record<AnswerName, JsonSchema>;
  // The one rule a refinement says in zod, which JSON Schema says with if/then.
  answers.ApiError = { ...answers.ApiError, ...errors.API_ERROR_RULE };
  return answers;
}

/**
 * The schemas of the document's components: requests derived from the zod schemas the
 * routes validate with, answers from the contracts' (src/contracts/).
 */
export const SCHEMAS = {
  // ----- requests (from zod)
  LeaseAcquireOrRenew: fromZod(leases.LeaseWriteBodies.acquire),
  LeaseRelease: fromZod(leases.LeaseWriteBodies.release),
  FenceQuestion: fromZod(leases.LeaseWriteBodies.fence),
  NodeInput: fromZod(NodeInput),
  NodePatch: fromZod(NodePatch),
  BulkNodes: fromZod(BulkNodesRequest),
  // The route requires `shards` and checks each name (HeartbeatBody pipes into ServedShards,
  // which fromZod describes by its input side): the names' schema is the Store's.
  Heartbeat: {
    ...fromZod(agents.HeartbeatBody),
    properties: {
      ...(fromZod(agents.HeartbeatBody).properties as Record<string, JsonSchema>),
      shards: (fromZod(HeartbeatRequest).properties as Record<string, JsonSchema>).shards,
    },
  },
  FeedAck: fromZod(feed.AckBody),
  ShardDefinitionBody: fromZod(shards.ShardDefinitionBody),
  WebhookPayload: fromZod(traits.WebhookPayload),
  TraitReset: fromZod(traits.TraitResetBody),
  LoginForm: fromZod(LoginForm),

  // ----- answers (from the contracts)
  ...answerSchemas(),
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
  fencedKey: {
    name: "fence_key",
    in: "path",
    required: true,
    description: "The lease's fence key, as its grant answered it (after the token and a `-`).",
    schema: fromZod(FenceKey),
    example: "5f0c3d5e8a1b4c2d9e7f6a5b4c3d2e1f",
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
