import { Router, type Response } from "express";
import { z } from "zod";
import { FencingToken } from "../domain/lease.js";
import { AgentId } from "../domain/names.js";
import { ValidationError, parseOrThrow } from "../domain/validation.js";
import type { LeaseView } from "../lease/machine.js";
import type { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { assertActsAs, principalOf } from "./auth.js";
import { leaseJson } from "./leases.js";
import { knownShards, liveLeases } from "./shards.js";

/** Like nova's service_down_time: an agent not heard from for this long is down. */
export const AGENT_DOWN_AFTER_MS = 60_000;

const AgentPath = z.strictObject({ id: AgentId });
const NodesQuery = z.strictObject({
  token: z
    .string({ error: "must be a comma-separated list of fencing tokens" })
    .transform((list) => list.split(",").map(Number))
    .pipe(z.array(FencingToken).max(1000))
    .optional(),
});

/** The live lease of every shard the bridge knows of. */
async function allLiveLeases(store: Store, catalog: ShardCatalog): Promise<Map<string, LeaseView>> {
  return liveLeases(store, await knownShards(store, catalog, await store.nodes.counts()));
}

function agentOf(req: { params: unknown }, res: Response): string {
  const { id } = parseOrThrow(AgentPath, req.params);
  assertActsAs(res, id);
  return id;
}

/**
 *   POST /v1/agents/{id}/heartbeat  -> 200 {"agent","last_seen"}          (the agent itself, or admin)
 *   GET  /v1/agents                 -> 200 {"agents":[{"id","last_seen","age_ms","up","shards"}]}
 *   GET  /v1/agents/{id}/nodes?token=T1,T2 -> 200 {"agent","leases":[...],"nodes":[... with "token"]}
 * An agent's nodes are the nodes of the shards it holds a live lease on right now under
 * one of the tokens it presents (an agent must present them; admin may leave them out),
 * each with the fencing token its writes must carry.
 */
export function agentRoutes(store: Store, catalog: ShardCatalog): Router {
  const router = Router();

  router.post("/v1/agents/:id/heartbeat", async (req, res) => {
    const agent = agentOf(req, res);
    const seen = await store.heartbeat(agent);
    res.json({ agent, last_seen: new Date(seen.lastSeenMs).toISOString() });
  });

  router.get("/v1/agents", async (_req, res) => {
    const [seen, leases] = await Promise.all([store.agents(), allLiveLeases(store, catalog)]);
    const held = new Map<string, string[]>();
    for (const [shard, lease] of leases)
      held.set(lease.holder, [...(held.get(lease.holder) ?? []), shard].sort());
    const agents = seen.map((s) => ({
      id: s.agent,
      last_seen: new Date(s.lastSeenMs).toISOString(),
      age_ms: s.ageMs,
      up: s.ageMs < AGENT_DOWN_AFTER_MS,
      shards: held.get(s.agent) ?? [],
    }));
    // A holder that never sent a heartbeat still shows: it holds shards.
    for (const [agent, shards] of held) {
      if (!seen.some((s) => s.agent === agent))
        agents.push({ id: agent, last_seen: "", age_ms: -1, up: false, shards });
    }
    res.json({ agents, down_after_ms: AGENT_DOWN_AFTER_MS });
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
    const mine = [...(await allLiveLeases(store, catalog))].filter(
      ([, lease]) => lease.holder === agent && (presented === undefined || presented.includes(lease.token)),
    );
    const tokens = new Map(mine.map(([shard, lease]) => [shard, lease.token]));
    const nodes = await store.nodes.ofShards([...tokens.keys()]);
    res.json({
      agent,
      leases: mine
        .map(([shard, lease]) => ({ shard, ...leaseJson(lease) }))
        .sort((a, b) => a.shard.localeCompare(b.shard)),
      nodes: nodes.map((node) => ({ ...node, token: tokens.get(node.shard!)! })),
    });
  });

  return router;
}
