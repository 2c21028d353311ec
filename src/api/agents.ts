import { Router, type Response } from "express";
import { z } from "zod";
import { FencingToken } from "../domain/lease.js";
import { AgentId } from "../domain/names.js";
import { ValidationError, parseOrThrow } from "../domain/validation.js";
import type { LeaseView } from "../lease/machine.js";
import type { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { assertActsAs, principalOf } from "./auth.js";
import { bodyObject } from "./body.js";
import { leaseJson } from "./leases.js";
import { knownShards, liveLeases } from "./shards.js";
import { SERVICE_DOWN_TIME_MS, legacyNodesOf, legacyPoolMembers, servesNoShard } from "../ring/membership.js";
import type { LegacyPool } from "../ring/pool.js";

const AgentPath = z.strictObject({ id: AgentId });
/**
 * `shards` must be given: [] puts the agent in nova's legacy ring pool, so a body left
 * empty by accident must not (the ring would hand a sharded agent unsharded nodes).
 */
const HeartbeatBody = z.strictObject({
  shards: z.array(z.unknown(), {
    error: (issue) =>
      issue.input === undefined
        ? "is required: the shards this agent serves ([] for nova's legacy ring pool)"
        : "must be a list of shard names",
  }),
});
const NodesQuery = z.strictObject({
  token: z
    .string({ error: "must be a comma-separated list of fencing tokens" })
    // Empty: the agent holds no lease (a legacy pool member asking for its ring's nodes).
    .transform((list) => (list === "" ? [] : list.split(",").map(Number)))
    .pipe(z.array(FencingToken).max(1000))
    .optional(),
});

/** The live lease of every shard the bridge knows of. */
async function allLiveLeases(store: Store, catalog: ShardCatalog): Promise<Map<string, LeaseView>> {
  return liveLeases(store, await knownShards(store, catalog, await store.nodes.counts()));
}

/** Agents that hold a live lease on some shard. */
const holdersOf = (leases: Map<string, LeaseView>) => new Set([...leases.values()].map((l) => l.holder));

/** The legacy pool's members as nova would list them now: up, serving no shard, holding no lease. */
export function legacyPoolLoader(store: Store, catalog: ShardCatalog, serviceDownMs = SERVICE_DOWN_TIME_MS) {
  return async (): Promise<string[]> => {
    const [seen, leases] = await Promise.all([store.agents(), allLiveLeases(store, catalog)]);
    return legacyPoolMembers(seen, holdersOf(leases), serviceDownMs);
  };
}

function agentOf(req: { params: unknown }, res: Response): string {
  const { id } = parseOrThrow(AgentPath, req.params);
  assertActsAs(res, id);
  return id;
}

/**
 *   POST /v1/agents/{id}/heartbeat {"shards"?:[...]} -> 200 {"agent","last_seen","serves"}
 *   GET  /v1/agents                 -> 200 {"agents":[{"id","last_seen","age_ms","up","shards","serves","legacy_pool"}]}
 *   GET  /v1/agents/{id}/nodes?token=T1,T2 -> 200 {"agent","leases":[...],"legacy":{...},"nodes":[...]}
 * An agent's nodes: the nodes of the shards it holds a live lease on right now under one
 * of the tokens it presents (an agent must present them; admin may leave them out), each
 * with the fencing token its writes must carry ("via":"lease"); the unsharded nodes whose
 * instance is on it ("via":"instance"); and, when it is in the legacy pool (serves no
 * shard), the unsharded nodes nova's ring gives it ("via":"ring", no token).
 */
export function agentRoutes(
  store: Store,
  catalog: ShardCatalog,
  pool: LegacyPool,
  serviceDownMs = SERVICE_DOWN_TIME_MS,
): Router {
  const router = Router();

  router.post("/v1/agents/:id/heartbeat", async (req, res) => {
    const agent = agentOf(req, res);
    const body = parseOrThrow(HeartbeatBody, bodyObject(req));
    const seen = await store.heartbeat(agent, body.shards as string[] | undefined);
    res.json({ agent, last_seen: new Date(seen.lastSeenMs).toISOString(), serves: seen.serves });
  });

  router.get("/v1/agents", async (_req, res) => {
    const [seen, leases] = await Promise.all([store.agents(), allLiveLeases(store, catalog)]);
    const held = new Map<string, string[]>();
    for (const [shard, lease] of leases)
      held.set(lease.holder, [...(held.get(lease.holder) ?? []), shard].sort());
    const pool = new Set(legacyPoolMembers(seen, holdersOf(leases), serviceDownMs));
    const agents = seen.map((s) => ({
      id: s.agent,
      last_seen: new Date(s.lastSeenMs).toISOString(),
      age_ms: s.ageMs,
      up: s.ageMs <= serviceDownMs,
      shards: held.get(s.agent) ?? [],
      serves: s.serves,
      legacy_pool: pool.has(s.agent.toLowerCase()),
    }));
    // A holder that never sent a heartbeat still shows: it holds shards.
    for (const [agent, shards] of held) {
      if (!seen.some((s) => s.agent === agent))
        agents.push({
          id: agent,
          last_seen: "",
          age_ms: -1,
          up: false,
          shards,
          serves: [],
          legacy_pool: false,
        });
    }
    res.json({ agents, down_after_ms: serviceDownMs });
  });

  router.get("/v1/agents/:id/nodes", async (req, res) => {
    const agent = agentOf(req, res);
    const { token: presented } = parseOrThrow(NodesQuery, req.query);
    // An agent must say which leases it holds: a process that lost its lease (an older
    // incarnation of the same agent id) must not learn the new token from here.
    if (principalOf(res).role === "agent" && presented === undefined) {
      throw new ValidationError([
        { field: "token", reason: "required for an agent: the fencing tokens it holds" },
      ]);
    }
    const [leases, seen] = await Promise.all([allLiveLeases(store, catalog), store.agents()]);
    const mine = [...leases].filter(
      ([, lease]) => lease.holder === agent && (presented === undefined || presented.includes(lease.token)),
    );
    const tokens = new Map(mine.map(([shard, lease]) => [shard, lease.token]));
    // In the legacy pool whether or not the others count it as up: nova adds its own host.
    const inPool = servesNoShard(agent, seen.find((s) => s.agent === agent)?.serves, holdersOf(leases));
    const [sharded, unsharded, ringed] = await Promise.all([
      store.nodes.ofShards([...tokens.keys()]),
      store.nodes.unsharded(),
      inPool ? pool.ringFor(agent) : Promise.resolve(null),
    ]);
    const legacy = legacyNodesOf(agent, unsharded, ringed?.ring ?? null);
    res.json({
      agent,
      leases: mine
        .map(([shard, lease]) => ({ shard, ...leaseJson(lease, true) }))
        .sort((a, b) => a.shard.localeCompare(b.shard)),
      legacy: {
        pool_member: inPool,
        ring: pool.kind,
        members: ringed?.ring.members ?? [],
        built_at: ringed === null ? null : new Date(ringed.snapshot.builtAtMs).toISOString(),
      },
      nodes: [
        ...sharded.map((node) => ({ ...node, token: tokens.get(node.shard!)!, via: "lease" })),
        ...legacy.map(({ node, reason }) => ({ ...node, token: null, via: reason })),
      ],
    });
  });

  return router;
}
