import { DeclaredRoutes } from "../http/declared-routes.js";
import type { Response } from "express";
import { z } from "zod";
import { NodesQuery } from "../../contracts/agents.js";
import { AgentId, HostTwinError, hostKey } from "../../core/names.js";
import { ValidationError, parseOrThrow } from "../../core/validation.js";
import type { ShardCatalog } from "../../bridge/shards/catalog.js";
import type { Store } from "../../store/store.js";
import {
  assertActsAs,
  assertRole,
  assertViewerReads,
  principalFrom,
  principalOf,
  type TokenAuthority,
} from "../http/auth.js";
import type { Role } from "../../runtime/tokens-file.js";
import { readRequestChunks } from "../http/body.js";
import { bodyPolicyOf, HEARTBEAT_BODY } from "../http/limits.js";
import { expressPath, urlPattern } from "../http/declared-routes.js";
import type { BridgeMetrics } from "../http/metrics.js";
import { rawHandler, type RawHandler } from "../http/mounted-routes.js";
import { serveRaw } from "../http/raw-route.js";
import { conflict, HttpError } from "../http/errors.js";
import { logger } from "../../runtime/log.js";
import { decodeFailure } from "../decode/failure.js";
import type { DecodePool } from "../decode/decode-pool.js";
import { agentsOverview, leaseCensus } from "../../bridge/shards/overview.js";
import { inServiceOf } from "../../bridge/shards/queries.js";
import type { LegacyAssignments } from "../../bridge/legacy-assignment.js";
import { SERVICE_DOWN_TIME_MS, servesNoShard } from "../../core/ring/membership.js";
import type { LegacyPool } from "../../core/ring/pool.js";
import { streamJsonList } from "../http/stream.js";
import type { AgentNodeLists } from "../../bridge/shards/agent-nodes.js";
import { leaseJson } from "../../bridge/shards/lease-json.js";
import type { AgentList, AgentSeen } from "../../contracts/agents.js";
import { READ, AS_AGENT, ADMIN, declaredRoles, type Operation } from "../openapi/operation.js";

export const AgentPath = z.strictObject({ id: AgentId });

/** The agent of the path, after the route's checks: its declared `roles`, and an agent only as itself. */
function agentOf(req: { params: unknown }, res: Response, roles: readonly Role[]): string {
  const principal = principalOf(res);
  assertRole(principal, roles);
  const { id } = parseOrThrow(AgentPath, req.params);
  assertActsAs(principal, id);
  return id;
}

/** The agent routes' operations, as the document lists them (operations.ts) and the role checks read them. */
export const AGENT_OPERATIONS = {
  heartbeat: {
    method: "post",
    path: "/v1/agents/{id}/heartbeat",
    id: "heartbeat",
    tag: "agents",
    summary: "An agent is alive, and serves these shards",
    description:
      "`shards` is required: what the agent serves, like nova's `[ironic] shard`; `[]` puts it in the legacy ring pool. Send every 10 s. `instance` (optional): the sending process's name for itself, the same in each of its heartbeats: the agent's `serves` is then what each of its instances heard within the service down time declared last, together (an `agent` and a `run` of one id add up instead of overwriting each other); the answer's `serves` is that.",
    access: AS_AGENT,
    bodyPolicy: HEARTBEAT_BODY,
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
  listAgents: {
    method: "get",
    path: "/v1/agents",
    id: "listAgents",
    tag: "agents",
    summary: "Every agent: up or down, the leases it holds, what it serves",
    access: READ,
    answers: { 200: { description: "the agents", schema: "AgentList" } },
  },
  forgetAgent: {
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
  agentNodes: {
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
} satisfies Record<string, Operation>;

/** The roles the heartbeat and the node list check, read from their declarations once, when loaded. */
const HEARTBEAT_ROLES = declaredRoles(AGENT_OPERATIONS.heartbeat);
const AGENT_NODES_ROLES = declaredRoles(AGENT_OPERATIONS.agentNodes);

const HEARTBEAT_ROUTE = expressPath(AGENT_OPERATIONS.heartbeat.path);
const HEARTBEAT_URL = urlPattern(AGENT_OPERATIONS.heartbeat.path);
const HEARTBEAT_LIMIT = bodyPolicyOf(AGENT_OPERATIONS.heartbeat).limit;

/**
 *   POST /v1/agents/{id}/heartbeat {"shards":[...],"instance"?} -> 200 {"agent","last_seen","serves"}
 * Every agent's, every 10 s: served on node:http ahead of express, as the lease writes are
 * (see leaseWrites), in the order express's pipeline checks it — the bearer token, a
 * viewer's write, the body, the path, who may act as the agent, then the body's fields.
 */
export function heartbeatWrite(context: {
  store: Store;
  decoder: DecodePool;
  metrics: BridgeMetrics;
  authority: TokenAuthority;
  /** nova's service_down_time: how long an instance's declared shards count (see Store.heartbeat) */
  serviceDownMs: number;
}): RawHandler {
  return rawHandler([AGENT_OPERATIONS.heartbeat], (req, res) => {
    const match = req.method === "POST" ? HEARTBEAT_URL.exec(req.url ?? "") : null;
    if (match === null) return false;
    serveRaw(req, res, HEARTBEAT_ROUTE, context.metrics, { pathField: "id" }, async () => {
      const principal = principalFrom(context.authority, req.headers.authorization);
      assertViewerReads(principal, "POST", req.url!.split("?")[0]!);
      assertRole(principal, HEARTBEAT_ROLES);
      const body = await readRequestChunks(req, res, HEARTBEAT_LIMIT);
      const { id: agent } = parseOrThrow(AgentPath, { id: decodeURIComponent(match[1]!) });
      assertActsAs(principal, agent);
      const said = await context.decoder.decode({ kind: "heartbeat" }, body);
      if (!said.ok) throw decodeFailure(said);
      // An instance's shards count as long as the instance counts as up.
      const seen = await context.store.heartbeat(agent, said.value.shards, {
        instance: said.value.instance,
        windowMs: context.serviceDownMs,
      });
      return {
        status: 200,
        body: {
          agent,
          last_seen: new Date(seen.lastSeenMs).toISOString(),
          serves: seen.serves,
        } satisfies AgentSeen,
      };
    });
    return true;
  });
}

/**
 *   GET  /v1/agents                 -> 200 {"agents":[{"id","last_seen","age_ms","up","shards","serves","legacy_pool"}]}
 *   GET  /v1/agents/{id}/nodes?token=T1,T2 -> 200 {"agent","leases":[...],"legacy":{...},"nodes":[...]}
 * An agent's nodes: the nodes of the shards it holds a live lease on right now under one
 * of the tokens it presents (an agent must present them; admin may leave them out), each
 * with the fencing token its writes must carry ("via":"lease"); the unsharded nodes whose
 * instance is on it ("via":"instance"); and, when it is in the legacy pool (no shard it
 * declares or holds is in service: src/core/ring/membership.ts), the unsharded nodes nova's
 * ring gives it ("via":"ring", no token).
 */
export function agentRoutes(
  store: Store,
  catalog: ShardCatalog,
  pool: LegacyPool,
  assignments: LegacyAssignments,
  lists: AgentNodeLists,
  serviceDownMs = SERVICE_DOWN_TIME_MS,
): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(AGENT_OPERATIONS.listAgents, async (_req, res) => {
    const census = await leaseCensus(store, catalog);
    res.json({
      agents: await agentsOverview(store, catalog, census, serviceDownMs),
      down_after_ms: serviceDownMs,
    } satisfies AgentList);
  });

  routes.serve(AGENT_OPERATIONS.agentNodes, async (req, res) => {
    const agent = agentOf(req, res, AGENT_NODES_ROLES);
    const { token: presented } = parseOrThrow(NodesQuery, req.query);
    // An agent must say which leases it holds: a process that lost its lease (an older
    // incarnation of the same agent id) must not learn the new token from here.
    if (principalOf(res).role === "agent" && presented === undefined) {
      throw new ValidationError([
        { field: "token", reason: "required for an agent: the fencing tokens it holds" },
      ]);
    }
    const { seen, counts, held, pending } = await lists.start(agent);
    const mine = [...held]
      .filter(([, lease]) => presented === undefined || presented.includes(lease.token))
      .sort(([a], [b]) => (a < b ? -1 : 1));
    // In the legacy pool whether or not the others count it as up: nova adds its own host.
    const inPool = servesNoShard(seen?.serves, held.keys(), inServiceOf(catalog, counts));
    const ringed = inPool ? await pool.ringFor(agent) : null;
    // The pool holds nova's host keys: one that is this id's while this id has no record is
    // another spelling's (the registry keeps one per host), and both would get one share.
    if (seen === null && ringed?.snapshot.members.includes(hostKey(agent))) {
      const twin = (await store.agents()).find(
        (a) => a.agent !== agent && hostKey(a.agent) === hostKey(agent),
      );
      if (twin !== undefined) throw new HostTwinError(agent, twin.agent);
    }
    const share = ringed === null ? [] : await assignments.shareOf(ringed.ring, agent);
    const head = {
      agent,
      leases: mine.map(([shard, lease]) => ({ shard, ...leaseJson(lease, true) })),
      legacy: {
        pool_member: inPool,
        ring: pool.kind,
        members: ringed?.ring.members ?? [],
        built_at: ringed === null ? null : new Date(ringed.snapshot.builtAtMs).toISOString(),
      },
    };
    await streamJsonList(res, head, "nodes", lists.nodes(pending, mine, share));
  });

  // An operator's forgetting of an agent registered by mistake (a typo'd id, a host gone
  // for good): its record dropped, so it leaves GET /v1/agents and the page. Refused while it
  // is up or holds a lease — it would be back with its next heartbeat, or its lease would
  // outlive the record that explains it.
  routes.serve(AGENT_OPERATIONS.forgetAgent, async (req, res) => {
    const { id } = parseOrThrow(AgentPath, req.params);
    const seen = await store.agent(id);
    if (seen === null)
      throw new HttpError([
        {
          status: 404,
          code: "shardbridge.agent.not_found",
          title: "No such agent",
          detail: `no agent ${id} has sent a heartbeat`,
        },
      ]);
    const leases = await store.leasesOf(id);
    if (seen.ageMs < serviceDownMs || leases.size > 0)
      throw new HttpError([
        conflict(
          "agent.active",
          "Agent still active",
          leases.size > 0
            ? `agent ${id} holds the lease of ${[...leases.keys()].join(", ")}: stop it (or let the lease end) first`
            : `agent ${id} was heard ${seen.ageMs} ms ago (up for ${serviceDownMs} ms after): stop it first, or it comes back with its next heartbeat`,
        ),
      ]);
    await store.forgetAgent(id);
    logger.warn("agent-forgotten", {
      agent: id,
      last_seen: new Date(seen.lastSeenMs).toISOString(),
      remote: req.socket.remoteAddress,
      request_id: res.locals.requestId,
    });
    res.status(204).end();
  });

  return routes;
}
