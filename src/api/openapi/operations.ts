import type { RequestHandler } from "express";
import type { z } from "zod";
import { NodeListQuery } from "../../domain/node.js";
import { NodesQuery } from "../../contracts/agents.js";
import { ReadQuery } from "../../contracts/feed.js";
import { PAGE_ROLES, requireRole, type Role } from "../http/auth.js";
import { MAX_PAGES_PER_SESSION, MAX_VIEWERS, RECONNECT_MS, SESSION_MS, STATIC_TYPES } from "../ui/routes.js";
import type { JsonSchema, PARAMETERS, SCHEMAS } from "./schemas.js";

/**
 * Who may call an operation:
 * - `public`: no token (health checks, metrics, this document);
 * - `bearer`: a bearer token of one of `roles`; `actsAs`: an agent only as itself (the
 *   agent id in the path or body), admin for any;
 * - `webhook`: a bearer token of one of `roles` (the inspector's) and the HMAC signature headers;
 * - `ironic`: no bridge token: the caller's own Ironic credentials pass through;
 * - `page`: the status page's routes, for a browser: no bearer token, but the page's
 *   session cookie, which `session` says the route needs (`none`), answers differently
 *   without (`optional`: a redirect to the login), or refuses without (`required`: 401).
 */
export type Access =
  | { kind: "public" }
  | { kind: "bearer"; roles: readonly Role[]; actsAs?: boolean }
  | { kind: "webhook"; roles: readonly Role[] }
  | { kind: "ironic" }
  | { kind: "page"; session: "none" | "optional" | "required" };

/** A body of one media type and its schema. */
export interface Media {
  type: string;
  schema: JsonSchema;
}

/** What any answer may say besides its description. */
interface Answer {
  description: string;
  /** bodies of media types other than the JSON of `schema` or `codes` (a page, a script, an event stream) */
  content?: readonly Media[];
  /** headers the answer sends besides those every answer of its kind does (a redirect's Location): header objects or $refs */
  headers?: Record<string, JsonSchema>;
}

/**
 * A success answer (a status below 400, or `default`): a component schema as JSON, and/or
 * `content` of other types; neither: no body (204, a redirect), or any (Ironic's, passed on).
 */
export interface Success extends Answer {
  schema?: keyof typeof SCHEMAS;
}

/**
 * A refusal (a status from 400): in the API-SIG shape with the `shardbridge.` codes it may
 * carry (`codes`), a body of another JSON shape (`schema`: readyz's), Ironic's own error
 * passed on by the fenced endpoint (`ironic`), or a body of another type (`content`: the
 * login form again, as HTML) — one or several of these, as the operation answers them.
 * The builder adds the refusals every operation of a kind shares (401, 403, 400, 413,
 * 415, 500, 503): list here only what is the operation's own.
 */
export interface Refusal extends Answer {
  codes?: readonly string[];
  schema?: keyof typeof SCHEMAS;
  ironic?: true;
}

export interface Operation {
  method: "get" | "put" | "post" | "delete" | "patch" | "head" | "options";
  /** a path template: `{name}` for each parameter, as in `parameters` */
  path: string;
  id: string;
  tag: string;
  summary: string;
  description?: string;
  access: Access;
  parameters?: ReadonlyArray<keyof typeof PARAMETERS>;
  /** query parameters: the zod schema the route parses `req.query` with, and a word on each */
  query?: { schema: z.ZodObject; describe: Record<string, string> };
  /** the request body's component schema; `any`: forwarded as it is (the fenced endpoint) */
  body?: keyof typeof SCHEMAS | "any";
  /**
   * a form body (application/x-www-form-urlencoded, as a browser posts it) and its
   * component schema; what the form's fields break is the operation's own refusal
   */
  form?: keyof typeof SCHEMAS;
  answers: Record<number, Success | Refusal> & { default?: Success };
  /** false: the operation never touches the store, so never answers 503 store.unavailable */
  store?: false;
}

/** Every role a bearer token can have. */
export const ALL_ROLES: readonly Role[] = ["admin", "agent", "inspector", "viewer"];
const READ: Access = { kind: "bearer", roles: ALL_ROLES };
const AS_AGENT: Access = { kind: "bearer", roles: ["agent", "admin"], actsAs: true };
const ADMIN: Access = { kind: "bearer", roles: ["admin"] };
const LEASE_HOLDER: Access = { kind: "bearer", roles: ["agent", "admin"] };
const NO_NODE: Refusal = { description: "no such node", codes: ["node.not_found"] };

/** A page of the status page: fixed HTML (each starts so), never data of the request. */
const HTML: Media = { type: "text/html", schema: { type: "string", pattern: "^<!doctype html>" } };
/** The login form again, with a sentence of the bridge's own above it, and no cookie set. */
const FORM_AGAIN = (why: string): Refusal => ({
  description: `${why}: the login form again`,
  content: [HTML],
});
/** A 303 to `to` (no body), with other headers of its own. */
const seeOther = (to: string, description: string, headers: Record<string, JsonSchema> = {}): Success => ({
  description,
  headers: {
    Location: { description: `\`${to}\``, required: true, schema: { const: to } },
    ...headers,
  },
});

/** What the fenced endpoint answers: Ironic's answer, or its own refusals (`reaches`: a request that can reach Ironic). */
function fencedAnswers(write: boolean, reaches: boolean): Operation["answers"] {
  // Ironic's own 400, 404 or 409, passed on, share the status with the bridge's refusals.
  const ironic = reaches ? { ironic: true as const } : {};
  const answers: Operation["answers"] = {
    400: { description: "the shard segment is not valid percent-encoding", ...ironic },
    404: {
      description: "not `/fenced/{shard}/lease-{token}/ironic/…`",
      codes: ["fenced.bad_path"],
      ...ironic,
    },
  };
  if (reaches) {
    answers.default = { description: "Ironic's answer, as Ironic gave it (links rewritten)" };
    answers[502] = { description: "Ironic did not answer", codes: ["ironic.unreachable"] };
  }
  if (write)
    answers[409] = {
      description: "fenced: not the live lease, too little of it left, or not a node of this shard",
      codes: ["lease.fenced"],
      ...ironic,
    };
  return answers;
}

/**
 * The fenced Ironic endpoint: one operation per method, at its root (version discovery)
 * and under it. A write at the root is about no node: always refused.
 */
function fenced(method: Operation["method"]): Operation[] {
  const write = ["post", "put", "patch", "delete"].includes(method);
  const operation = (
    root: boolean,
    path: string,
    id: string,
    parameters: Operation["parameters"],
  ): Operation => ({
    method,
    path,
    id,
    tag: "fenced Ironic",
    summary:
      write && root
        ? `${method.toUpperCase()} at the endpoint's root: about no node, always refused`
        : write
          ? `${method.toUpperCase()} to Ironic, only under the shard's live lease, about a node of the shard`
          : `${method.toUpperCase()} to Ironic, passed on as it is`,
    description: write
      ? "Passes only if, now, `token` is the shard's live lease with at least TTL/3 left and the write is about a node Ironic says is in the shard (the node of `/v1/nodes/{node}/…`, or the node a port, portgroup, volume connector or target, or allocation belongs to). Otherwise 409 `shardbridge.lease.fenced` and nothing reaches Ironic. Served only with `serve --ironic URL`."
      : "Reads pass. Links in Ironic's JSON and `Location` are rewritten to this endpoint. Served only with `serve --ironic URL`.",
    access: { kind: "ironic" },
    parameters,
    ...(write && { body: "any" as const }),
    answers: fencedAnswers(write, !(write && root)),
    ...(!write && { store: false as const }),
  });
  const name = method[0]!.toUpperCase() + method.slice(1);
  return [
    operation(true, "/fenced/{shard}/lease-{token}/ironic", `fenced${name}Root`, [
      "fencedShard",
      "fencedToken",
    ]),
    operation(false, "/fenced/{shard}/lease-{token}/ironic/{ironic_path}", `fenced${name}`, [
      "fencedShard",
      "fencedToken",
      "ironicPath",
    ]),
  ];
}

/**
 * Every operation the bridge serves. A route added to the app goes here too (the contract
 * test compares this table with the routes the app mounts, both ways, and calls each
 * operation for each of its answers): method, path template, access, parameters, body,
 * and its own answers — the builder (document.ts) adds the refusals it shares with others.
 */
export const OPERATIONS: Operation[] = [
  // ----- operations
  {
    method: "get",
    path: "/healthz",
    id: "health",
    tag: "operations",
    summary: "Liveness, and which build answers",
    access: { kind: "public" },
    answers: {
      200: { description: "alive; the version and commit `shardbridge --version` prints", schema: "Health" },
    },
    store: false,
  },
  {
    method: "get",
    path: "/readyz",
    id: "ready",
    tag: "operations",
    summary: "Readiness: the store answers",
    access: { kind: "public" },
    answers: {
      200: { description: "the store answered a ping", schema: "Ready" },
      503: { description: "the store did not answer", schema: "NotReady" },
    },
    store: false,
  },
  {
    method: "get",
    path: "/metrics",
    id: "metrics",
    tag: "operations",
    summary: "Prometheus metrics",
    access: { kind: "public" },
    answers: {
      200: {
        description: "Prometheus text exposition",
        content: [{ type: "text/plain", schema: { type: "string" } }],
      },
    },
  },
  {
    method: "get",
    path: "/openapi.json",
    id: "openapi",
    tag: "operations",
    summary: "This document",
    description:
      "Unauthenticated, like /healthz: it says what every install of this version serves and holds no token, shard or node.",
    access: { kind: "public" },
    answers: {
      200: {
        description: "the OpenAPI 3.1 document of this API",
        content: [
          {
            type: "application/json",
            schema: {
              type: "object",
              required: ["openapi", "info", "paths"],
              properties: {
                openapi: { const: "3.1.0" },
                info: { type: "object" },
                paths: { type: "object" },
              },
            },
          },
        ],
      },
    },
    store: false,
  },

  // ----- leases
  {
    method: "post",
    path: "/v1/shards/{shard}/lease",
    id: "acquireOrRenewLease",
    tag: "leases",
    summary: "Acquire the shard's lease (no token), or renew it under `token`",
    description:
      "Acquire answers a **new** token, also when this agent held the lease (an older process of it is fenced out). Renew keeps the token and restarts the TTL (the shard's, from `shards/NAME.json`; default 6000 ms). Renew every TTL/3; stop acting 2/3 TTL after the last renew sent that succeeded. An acquire with `wait_ms` (at most 30000) that finds the lease held waits: it is answered the moment the lease is released, expires or is taken back — granted to one waiter, the others told who holds it (409 `lease.held`) — or at the end of the wait with a plain acquire's answer; either answer carries `waited_ms`, and a grant's lease began no earlier than `waited_ms` after the request arrived.",
    access: AS_AGENT,
    parameters: ["shard"],
    body: "LeaseAcquireOrRenew",
    answers: {
      200: { description: "granted or renewed", schema: "LeaseGrant" },
      403: {
        description: "the shard's definition does not list this agent",
        codes: ["shard.agent_not_allowed"],
      },
      404: {
        description:
          "acquire only: no definition names the shard and no node carries it (a bridge started with `--allow-undefined-shards` leases any valid name)",
        codes: ["shard.undefined"],
      },
      409: {
        description:
          "held by another (`lease`, `retry_after_ms`; after a wait, `waited_ms`); the store is recovering (`retry_after_ms`); renew under a token that is not the live one (`stale_token`) or of a lease that is gone (`expired`)",
        codes: ["lease.held", "lease.recovering", "lease.stale_token", "lease.expired"],
      },
    },
  },
  {
    method: "delete",
    path: "/v1/shards/{shard}/lease",
    id: "releaseLease",
    tag: "leases",
    summary: "Release the lease held under `token`",
    access: AS_AGENT,
    parameters: ["shard"],
    body: "LeaseRelease",
    answers: {
      204: { description: "released, or nothing was live (a retry is safe)" },
      409: {
        description: "held by another, or under another token",
        codes: ["lease.held", "lease.stale_token"],
      },
    },
  },
  {
    method: "post",
    path: "/v1/shards/{shard}/fence",
    id: "fence",
    tag: "leases",
    summary: "May a write under `token` happen now?",
    access: LEASE_HOLDER,
    parameters: ["shard"],
    body: "FenceQuestion",
    answers: {
      200: { description: "`allowed`: the token is the shard's live lease", schema: "FenceAnswer" },
      403: { description: "an agent presenting another agent's live token" },
    },
  },
  {
    method: "get",
    path: "/v1/shards/{shard}/lease",
    id: "readLease",
    tag: "leases",
    summary: "The shard's live lease and last token",
    description: "Tokens are null but for admin.",
    access: READ,
    parameters: ["shard"],
    answers: { 200: { description: "the live lease, or null", schema: "LeaseState" } },
  },

  // ----- shards
  {
    method: "get",
    path: "/v1/shards",
    id: "listShards",
    tag: "shards",
    summary: "Every shard: node count, holder, feed lag",
    description:
      'Most nodes first; unsharded nodes under "None" (as Ironic answers); defined or leased shards without nodes with count 0. `feed_lag_ms`: how long the oldest trait change the holder has not acknowledged has waited (null for "None").',
    access: READ,
    answers: { 200: { description: "the shards", schema: "ShardList" } },
  },
  {
    method: "get",
    path: "/v1/shards/{shard}",
    id: "getShard",
    tag: "shards",
    summary: "One shard as an agent needs it before serving it",
    description:
      "Its TTL, who may serve it (`agents` null: any agent), where its definition comes from (`defined_by`: `file`, `store` or null) and whether `migrate apply` is still filling it, node count, live lease, and the fenced Ironic endpoint (`{token}` to fill in) when the bridge fronts an Ironic.",
    access: READ,
    parameters: ["shard"],
    answers: {
      200: { description: "the shard", schema: "Shard" },
      404: {
        description: "neither defined, carrying nodes, nor leased since forgotten",
        codes: ["shard.not_found"],
      },
    },
  },
  {
    method: "delete",
    path: "/v1/shards/{shard}",
    id: "forgetShard",
    tag: "shards",
    summary: "Forget a shard's lease history (a name leased by mistake)",
    description:
      "Drops the shard from `GET /v1/shards` and the page. Its lease record stays in the store, so a later lease's token still climbs above every earlier one. Logged (`shard-forgotten`).",
    access: ADMIN,
    parameters: ["shard"],
    answers: {
      204: { description: "forgotten" },
      404: { description: "no listing holds the shard", codes: ["shard.not_found"] },
      409: {
        description: "defined (remove the definition first), carries nodes, or its lease is live",
        codes: ["shard.defined", "shard.carries_nodes", "lease.held"],
      },
    },
  },

  // ----- shard definitions
  {
    method: "get",
    path: "/v1/shard-definitions",
    id: "listShardDefinitions",
    tag: "shards",
    summary: "Every shard definition: this bridge's files and the store's",
    description:
      "`source`: `file` (this bridge's `shards/`) or `store` (written through this API, the same for every bridge on the store). `version` changes with every write to the store's; `refresh_ms`: how soon every bridge uses a write.",
    access: READ,
    answers: { 200: { description: "the definitions", schema: "ShardDefinitionList" } },
  },
  {
    method: "put",
    path: "/v1/shard-definitions/{shard}",
    id: "putShardDefinition",
    tag: "shards",
    summary: "Define a shard in the store, for every bridge on it",
    description:
      "TTL, allowed agents (left out: any), description, and `filling` (`migrate apply`'s mark: while set, a lease on the shard or a heartbeat declaring it keeps the agent in nova's legacy pool). In force on this bridge when answered, on every other within `takes_effect_within_ms`.",
    access: ADMIN,
    parameters: ["shard"],
    body: "ShardDefinitionBody",
    answers: {
      200: { description: "replaced", schema: "ShardDefinitionWritten" },
      201: { description: "created", schema: "ShardDefinitionWritten" },
      409: { description: "a file of this bridge defines the shard", codes: ["shard.defined_by_file"] },
    },
  },
  {
    method: "delete",
    path: "/v1/shard-definitions/{shard}",
    id: "deleteShardDefinition",
    tag: "shards",
    summary: "Remove a shard's definition from the store",
    access: ADMIN,
    parameters: ["shard"],
    answers: {
      204: { description: "removed" },
      404: { description: "the store holds no definition of the shard", codes: ["shard.not_defined"] },
      409: { description: "a file of this bridge defines the shard", codes: ["shard.defined_by_file"] },
    },
  },

  // ----- nodes
  {
    method: "post",
    path: "/v1/nodes/bulk",
    id: "bulkNodes",
    tag: "nodes",
    summary: "Create or replace up to 20,000 whole nodes",
    description: "Every node is validated before any is written; no uuid twice.",
    access: ADMIN,
    body: "BulkNodes",
    answers: { 200: { description: "how many were created and updated", schema: "BulkResult" } },
  },
  {
    method: "put",
    path: "/v1/nodes/{uuid}",
    id: "putNode",
    tag: "nodes",
    summary: "Create or replace a whole node",
    description:
      'Every field must be given (`null` for no name, `"shard": null` for the unsharded pool, `""` for the default conductor group, `"instance_host": null`): one left out is a 400, never a default. `uuid`, if given, equals the path\'s.',
    access: ADMIN,
    parameters: ["uuid"],
    body: "NodeInput",
    answers: {
      200: { description: "replaced", schema: "Node" },
      201: { description: "created", schema: "Node" },
    },
  },
  {
    method: "patch",
    path: "/v1/nodes/{uuid}",
    id: "patchNode",
    tag: "nodes",
    summary: "Change some fields of a node (JSON merge patch)",
    description:
      "Fields given replace the stored ones (`null` clears), the rest stay; under a compare-and-set.",
    access: ADMIN,
    parameters: ["uuid"],
    body: "NodePatch",
    answers: {
      200: { description: "the node as now stored", schema: "Node" },
      404: NO_NODE,
    },
  },
  {
    method: "get",
    path: "/v1/nodes/{uuid}",
    id: "getNode",
    tag: "nodes",
    summary: "One node",
    access: READ,
    parameters: ["uuid"],
    answers: {
      200: { description: "the node", schema: "Node" },
      404: NO_NODE,
    },
  },
  {
    method: "delete",
    path: "/v1/nodes/{uuid}",
    id: "deleteNode",
    tag: "nodes",
    summary: "Delete a node",
    access: ADMIN,
    parameters: ["uuid"],
    answers: {
      204: { description: "deleted" },
      404: NO_NODE,
    },
  },
  {
    method: "get",
    path: "/v1/nodes",
    id: "listNodes",
    tag: "nodes",
    summary: "Nodes in uuid order, a page at a time",
    access: READ,
    query: {
      schema: NodeListQuery,
      describe: {
        shard: "comma-separated shard keys (at most 100)",
        sharded: "true: nodes in some shard; false: the unsharded pool",
        limit: "page size",
        marker: "the last uuid of the previous page",
      },
    },
    answers: { 200: { description: "a page; `next` the next page's URL, or null", schema: "NodeList" } },
  },
  {
    method: "get",
    path: "/v1/nodes/{uuid}/traits",
    id: "getNodeTraits",
    tag: "traits",
    summary: "A node's traits and who holds each",
    access: READ,
    parameters: ["uuid"],
    answers: {
      200: { description: "the traits", schema: "NodeTraits" },
      404: NO_NODE,
    },
  },
  {
    method: "post",
    path: "/v1/nodes/{uuid}/traits/reset",
    id: "resetNodeTraits",
    tag: "traits",
    summary: "Forget a node's inspection orders and/or remove every trait it holds (an operator's repair)",
    description:
      "`order`: each source's next result applies whatever its order (a node whose inspections are refused as stale). `traits`: every trait the node holds is removed, whoever holds it, as one change that reaches the shard's feed and Ironic. Logged as `node-traits-reset` (role, address, request id).",
    access: ADMIN,
    parameters: ["uuid"],
    body: "TraitReset",
    answers: {
      200: {
        description: "reset: the removals committed and the orders forgotten, per source",
        schema: "TraitsReset",
      },
      404: NO_NODE,
    },
  },

  // ----- agents
  {
    method: "post",
    path: "/v1/agents/{id}/heartbeat",
    id: "heartbeat",
    tag: "agents",
    summary: "An agent is alive, and serves these shards",
    description:
      "`shards` is required: what the agent serves, like nova's `[ironic] shard`; `[]` puts it in the legacy ring pool. Send every 10 s.",
    access: AS_AGENT,
    parameters: ["agent"],
    body: "Heartbeat",
    answers: {
      200: { description: "recorded", schema: "AgentSeen" },
      409: {
        description:
          "another registered agent's id equals this one but for case: one host to nova's ring (forget it first, or use its spelling); nothing recorded",
        codes: ["agent.host_twin"],
      },
    },
  },
  {
    method: "get",
    path: "/v1/agents",
    id: "listAgents",
    tag: "agents",
    summary: "Every agent: up or down, the leases it holds, what it serves",
    access: READ,
    answers: { 200: { description: "the agents", schema: "AgentList" } },
  },
  {
    method: "delete",
    path: "/v1/agents/{id}",
    id: "forgetAgent",
    tag: "agents",
    summary: "Forget an agent registered by mistake, or gone for good",
    description:
      "Its liveness record is dropped: it leaves `GET /v1/agents` and the status page (a later heartbeat registers it again). Refused while it is up (heard within the service down time) or holds a lease. Logged as `agent-forgotten`.",
    access: ADMIN,
    parameters: ["agent"],
    answers: {
      204: { description: "forgotten" },
      404: { description: "no agent of that id ever sent a heartbeat", codes: ["agent.not_found"] },
      409: { description: "up, or holding a lease: stop it first", codes: ["agent.active"] },
    },
  },
  {
    method: "get",
    path: "/v1/agents/{id}/nodes",
    id: "agentNodes",
    tag: "agents",
    summary: "An agent's nodes: of the shards it holds, with its instances, and its ring share",
    description:
      "Each node once, with `via`: `lease` (a shard it holds under one of the tokens presented, with that token), `instance` (an unsharded node whose instance is on it), `ring` (its share of nova's ring, in the legacy pool). An agent must present its tokens; admin may leave them out. Streamed: an error half way cuts the answer short.",
    access: AS_AGENT,
    parameters: ["agent"],
    query: {
      schema: NodesQuery,
      describe: {
        token: "comma-separated fencing tokens the agent holds (empty: none); required for an agent",
      },
    },
    answers: {
      200: { description: "the agent's nodes", schema: "AgentNodes" },
      409: {
        description:
          "a member of nova's ring equals this id but for case: one host to nova, one share for both",
        codes: ["agent.host_twin"],
      },
    },
  },

  // ----- inspection and the trait feed
  {
    method: "post",
    path: "/v1/inspector/webhook",
    id: "inspectorWebhook",
    tag: "traits",
    summary: "An inspection result, or explicit trait deltas, for one node (signed)",
    description:
      "A repeated `X-Shardbridge-Delivery` id gets the first answer again with `X-Shardbridge-Replay: true`, and nothing is applied twice (a 404 is not remembered). Refusals change nothing.",
    access: { kind: "webhook", roles: ["inspector"] },
    body: "WebhookPayload",
    answers: {
      200: { description: "applied: the additions and removals", schema: "TraitsApplied" },
      401: {
        description: "unsigned, a signature that does not match, or a timestamp outside ±300 s",
        codes: ["inspector.unsigned", "inspector.bad_signature", "inspector.stale_timestamp"],
      },
      404: NO_NODE,
      409: { description: "not after the last order applied for the node", codes: ["traits.stale"] },
      422: {
        description:
          "a trait another owns (`field`: the trait), or a change refused (`+X` with `-X`, over 50 traits)",
        codes: ["traits.not_owned", "traits.refused"],
      },
      503: { description: "the bridge has no webhook secret", codes: ["inspector.not_configured"] },
    },
  },
  {
    method: "get",
    path: "/v1/shards/{shard}/feed",
    id: "readFeed",
    tag: "traits",
    summary: "Trait changes of the shard's nodes after the acknowledged cursor (the live holder only)",
    description:
      "When entries after the cursor were trimmed away: `entries` empty and `resync` with every node's traits; apply them, then acknowledge `resume_after`.",
    access: LEASE_HOLDER,
    parameters: ["shard"],
    query: {
      schema: ReadQuery,
      describe: { token: "the caller's fencing token for the shard", limit: "entries at most" },
    },
    answers: {
      200: { description: "entries, oldest first, or a resync", schema: "FeedPage" },
      403: { description: "another agent's live token" },
      409: { description: "not the shard's live lease", codes: ["lease.stale_token"] },
    },
  },
  {
    method: "post",
    path: "/v1/shards/{shard}/feed/ack",
    id: "ackFeed",
    tag: "traits",
    summary: "Move the feed's cursor forward to an entry (never back)",
    access: LEASE_HOLDER,
    parameters: ["shard"],
    body: "FeedAck",
    answers: {
      200: { description: "the cursor now", schema: "FeedCursor" },
      403: { description: "another agent's live token" },
      409: {
        description: "not the shard's live lease, or an id past the cursor that is no entry (`field: id`)",
        codes: ["lease.stale_token", "feed.unknown_entry"],
      },
    },
  },
  {
    method: "get",
    path: "/v1/ironic/delivery",
    id: "ironicDelivery",
    tag: "ironic",
    summary: "Trait changes on their way to Ironic",
    access: READ,
    answers: {
      200: { description: "pending changes, the oldest's wait, batches", schema: "IronicDelivery" },
    },
    store: false,
  },

  // ----- the status page
  {
    method: "get",
    path: "/ui",
    id: "statusPage",
    tag: "status page",
    summary: "The status page, or a redirect to its login",
    description:
      "Fixed HTML with no data in it: the page's script fills it from `GET /ui/events`, and the Content-Security-Policy allows scripts and styles from the page's own files only.",
    access: { kind: "page", session: "optional" },
    answers: {
      200: { description: "the page", content: [HTML] },
      303: seeOther("/ui/login", "no session (none, lapsed, or forged): to the login form"),
    },
    store: false,
  },
  {
    method: "get",
    path: "/ui/login",
    id: "loginForm",
    tag: "status page",
    summary: "The login form",
    access: { kind: "page", session: "none" },
    answers: { 200: { description: "the form: one field, `token`", content: [HTML] } },
    store: false,
  },
  {
    method: "post",
    path: "/ui/login",
    id: "logIn",
    tag: "status page",
    summary: "Log in with a viewer's or admin's token: a session cookie for the page",
    description: `The cookie holds no token: \`<id>.<expiry>.<HMAC-SHA256 of both under a key derived from the token>\`, so it opens the page and nothing else (the API answers it as no credentials), lapses after ${SESSION_MS / 3_600_000} hours, is accepted by every bridge with the same tokens file, and stops working when its token leaves the file. Tokens of the roles ${PAGE_ROLES.map((r) => `\`${r}\``).join(" and ")} open the page. A refusal is the form again (HTML, no cookie), but for a cross-origin post and a body that is not read (JSON, as the API refuses).`,
    access: { kind: "page", session: "none" },
    form: "LoginForm",
    answers: {
      303: seeOther("/ui", "logged in: the session cookie, and to the page", {
        "Set-Cookie": { $ref: "#/components/headers/SetPageSession" },
      }),
      400: FORM_AGAIN("no token given"),
      401: FORM_AGAIN("a token this bridge does not know"),
      403: FORM_AGAIN("an agent's or the inspector's token (the page is not theirs)"),
      415: { description: "a body that is not a form", codes: ["body.invalid"] },
    },
    store: false,
  },
  {
    method: "post",
    path: "/ui/logout",
    id: "logOut",
    tag: "status page",
    summary: "Log out: the session cookie cleared",
    description:
      "Clears the cookie in this browser. Nothing is stored to revoke, so a copy of the cookie taken elsewhere lasts until its expiry; taking its token out of the tokens file ends every session of that token.",
    access: { kind: "page", session: "none" },
    answers: {
      303: seeOther("/ui/login", "the cookie cleared, and to the login form", {
        "Set-Cookie": { $ref: "#/components/headers/ClearPageSession" },
      }),
    },
    store: false,
  },
  {
    method: "get",
    path: "/ui/static/{file}",
    id: "pageFile",
    tag: "status page",
    summary: "One of the page's files: its script, style and icon",
    description: "Files of this build, revalidated on each use (`Cache-Control: no-cache`).",
    access: { kind: "page", session: "none" },
    parameters: ["file"],
    answers: {
      200: {
        description: "the file",
        content: [...new Set(Object.values(STATIC_TYPES).map((type) => type.split(";")[0]!))].map((type) => ({
          type,
          schema: { type: "string" },
        })),
      },
      404: { description: "a well-formed name the page has no file of", codes: ["route.not_found"] },
    },
    store: false,
  },
  {
    method: "get",
    path: "/ui/events",
    id: "pageEvents",
    tag: "status page",
    summary: "The page's data, as server-sent events, while the session lasts",
    description: `Starts with \`retry: ${RECONNECT_MS}\` (reconnect ${RECONNECT_MS / 1000} s after a lost connection), then events named \`history\` (the last transitions), \`transition\`, \`snapshot\` (every look at the store, 500 ms or less often for a large fleet) and \`trouble\` (a look failed), each \`data\` one JSON object: docs/API.md lists their fields. Never a fencing token. The stream ends when the session lapses; the page's reconnect is then refused (401).`,
    access: { kind: "page", session: "required" },
    answers: {
      200: {
        description: "the event stream",
        content: [
          { type: "text/event-stream", schema: { type: "string", pattern: `^retry: ${RECONNECT_MS}\n\n` } },
        ],
      },
      429: {
        description: `this login's token has ${MAX_PAGES_PER_SESSION} pages open already`,
        codes: ["ui.too_many_pages"],
      },
      503: {
        description: `${MAX_VIEWERS} pages are open on this bridge already`,
        codes: ["ui.too_many_viewers"],
      },
    },
    store: false,
  },

  // ----- the fenced Ironic endpoint
  ...(["get", "head", "options", "post", "put", "patch", "delete"] as const).flatMap(fenced),
];

/**
 * The roles the operation `id` takes, as the table above declares them: what its route
 * checks (requireRole, assertRole), so the document and the check cannot part. Throws for
 * an id the table has no token-checked operation of: a route built with a typo fails
 * when the app is built, in every test, not at its first request.
 */
export function rolesOf(id: string): readonly Role[] {
  const { access } = OPERATIONS.find((op) => op.id === id) ?? {};
  if (access?.kind !== "bearer" && access?.kind !== "webhook")
    throw new Error(`no operation ${id} that takes a bearer token in OPERATIONS`);
  return access.roles;
}

/** An express route's role check (requireRole) for the operation `id`, by its declared roles. */
export const roleCheck = (id: string): RequestHandler => requireRole(...rolesOf(id));
