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
import { agentsOverview, leaseCensus } from "./overview.js";
import { inServiceOf } from "../shards/queries.js";
import type { NodeRegistry } from "../nodes/registry.js";
import type { BareMetalNode } from "../domain/node.js";
import type { LegacyAssignments } from "../ring/assignment.js";
import { SERVICE_DOWN_TIME_MS, servesNoShard } from "../ring/membership.js";
import type { LegacyPool } from "../ring/pool.js";
import { streamJsonList, type ListPage } from "./stream.js";
import { ShardNodesCache } from "./shard-nodes.js";
import { leaseJson, nodeJson } from "./views.js";

export const AgentPath = z.strictObject({ id: AgentId });
/**
 * `shards` must be given: [] puts the agent in nova's legacy ring pool, so a body left
 * empty by accident must not (the ring would hand a sharded agent unsharded nodes).
 */
export const HeartbeatBody = z.strictObject({
  shards: z.array(z.unknown(), {
    error: (issue) =>
      issue.input === undefined
        ? "is required: the shards this agent serves ([] for nova's legacy ring pool)"
        : "must be a list of shard names",
  }),
});
export const NodesQuery = z.strictObject({
  token: z
    .string({ error: "must be a comma-separated list of fencing tokens" })
    // Empty: the agent holds no lease (a legacy pool member asking for its ring's nodes).
    .transform((list) => (list === "" ? [] : list.split(",").map(Number)))
    .pipe(z.array(FencingToken).max(1000))
    .optional(),
});

/**
 * An agent's nodes, page by page: the unsharded nodes whose instance is on it, its share
 * of nova's ring (each node read again, so one that left the pool since the share was
 * computed is not listed), then the nodes of each shard it holds (with the token its
 * writes carry). Unsharded nodes come first on purpose: a node that moves from the pool
 * into one of the agent's shards while the list is read (the switch from the ring to
 * shards, see src/ring/membership.ts) is then seen in the pool, in the shard, or both —
 * never in neither; one seen in both is listed once, from the pool. Every page is one
 * bounded store call: O(the answer).
 */
async function* agentNodes(
  nodes: NodeRegistry,
  shardNodes: ShardNodesCache,
  leases: Array<[string, LeaseView]>,
  versions: ReadonlyMap<string, number>,
  instance: { pages: AsyncIterable<BareMetalNode[]>; whole: boolean },
  ringShare: readonly string[],
): AsyncGenerator<ListPage> {
  const unsharded = new Set<string>();
  for await (const page of instance.pages) {
    for (const node of page) unsharded.add(node.uuid);
    yield page.map((node) => nodeJson(node, ',"token":null,"via":"instance"'));
  }
  for (let i = 0; i < ringShare.length; i += RING_PAGE) {
    const page = (await nodes.getMany(ringShare.slice(i, i + RING_PAGE))).filter(
      (node): node is BareMetalNode => node !== null && node.shard === null && node.instance_host === null,
    );
    for (const node of page) unsharded.add(node.uuid);
    yield page.map((node) => nodeJson(node, ',"token":null,"via":"ring"'));
  }
  for (const [shard, lease] of leases) {
    const extra = `,"token":${lease.token},"via":"lease"`;
    // The kept listing is whole JSON: used only when no pool node can be in it twice (none
    // listed), and when every pool node the list could hold was read no later than the
    // shard's version: the instances whole in their first page (read in one step with the
    // versions), and no ring share (its nodes are read after).
    const kept = unsharded.size === 0 && instance.whole && ringShare.length === 0;
    const joined = kept ? await shardNodes.joined(shard, extra, versions.get(shard)) : null;
    if (joined !== null) {
      if (joined.length > 0) yield joined;
      continue;
    }
    for await (const page of nodes.pages({ kind: "places", places: [shard] }))
      yield page.flatMap((node) => (unsharded.has(node.uuid) ? [] : [nodeJson(node, extra)]));
  }
}

/** Nodes of nova's ring share read per store call. */
const RING_PAGE = 250;

/** Agents whose grants a bridge remembers before it starts over (each a handful of shards). */
const REMEMBERED_AGENTS = 10_000;

/**
 * The shards each agent was granted when its node list was last read. A store's grants
 * only grow (LeaseBackend.grantedTo), so an agent's next list can read those shards'
 * leases and versions in the same round trip as its grants, instead of after them; the
 * grants read fresh then say which of those count, and a shard granted since is read in
 * a second round trip as before. Per bridge: a guess, never the answer.
 */
class GrantsSeen {
  private readonly byAgent = new Map<string, readonly string[]>();

  get(agent: string): readonly string[] {
    return this.byAgent.get(agent) ?? [];
  }

  set(agent: string, shards: readonly string[]): void {
    if (!this.byAgent.has(agent)) {
      // An id never granted anything (an admin's look at any name) has nothing to guess.
      if (shards.length === 0) return;
      if (this.byAgent.size >= REMEMBERED_AGENTS) this.byAgent.clear();
    }
    this.byAgent.set(agent, shards);
  }
}

/**
 * The live leases `agent` holds among `shards` and those shards' node-list versions,
 * together; the versions from `versionsRead` when they were read already (with the first
 * instance page, see NodeRegistry.instanceNodes), else read now.
 */
async function leasesAndVersions(
  store: Store,
  agent: string,
  shards: readonly string[],
  versionsRead?: Promise<number[]>,
): Promise<{ held: Map<string, LeaseView>; versions: Map<string, number> }> {
  if (shards.length === 0) return { held: new Map(), versions: new Map() };
  const [held, versions] = await Promise.all([
    store.liveLeasesAmong(agent, shards),
    versionsRead ?? store.nodes.placeVersions(shards),
  ]);
  return { held, versions: new Map(shards.map((shard, i) => [shard, versions[i]!])) };
}

function agentOf(req: { params: unknown }, res: Response): string {
  const { id } = parseOrThrow(AgentPath, req.params);
  assertActsAs(principalOf(res), id);
  return id;
}

/**
 *   POST /v1/agents/{id}/heartbeat {"shards"?:[...]} -> 200 {"agent","last_seen","serves"}
 *   GET  /v1/agents                 -> 200 {"agents":[{"id","last_seen","age_ms","up","shards","serves","legacy_pool"}]}
 *   GET  /v1/agents/{id}/nodes?token=T1,T2 -> 200 {"agent","leases":[...],"legacy":{...},"nodes":[...]}
 * An agent's nodes: the nodes of the shards it holds a live lease on right now under one
 * of the tokens it presents (an agent must present them; admin may leave them out), each
 * with the fencing token its writes must carry ("via":"lease"); the unsharded nodes whose
 * instance is on it ("via":"instance"); and, when it is in the legacy pool (no shard it
 * declares or holds is in service: src/ring/membership.ts), the unsharded nodes nova's
 * ring gives it ("via":"ring", no token).
 */
export function agentRoutes(
  store: Store,
  catalog: ShardCatalog,
  pool: LegacyPool,
  assignments: LegacyAssignments,
  serviceDownMs = SERVICE_DOWN_TIME_MS,
): Router {
  const router = Router();
  const shardNodes = new ShardNodesCache(store.nodes);
  const grantsSeen = new GrantsSeen();

  router.post("/v1/agents/:id/heartbeat", async (req, res) => {
    const agent = agentOf(req, res);
    const body = parseOrThrow(HeartbeatBody, bodyObject(req));
    const seen = await store.heartbeat(agent, body.shards as string[] | undefined);
    res.json({ agent, last_seen: new Date(seen.lastSeenMs).toISOString(), serves: seen.serves });
  });

  router.get("/v1/agents", async (_req, res) => {
    const census = await leaseCensus(store, catalog);
    res.json({
      agents: await agentsOverview(store, catalog, census, serviceDownMs),
      down_after_ms: serviceDownMs,
    });
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
    // One round trip to the store before the answer starts, as a rule: the shards the
    // agent was granted, its record, the node counts (is a shard it serves in service?),
    // its first instance page, and the leases and node-list versions of the shards it was
    // granted last time (see GrantsSeen); a second only for shards granted since. The
    // versions come in one step with the instance page, or after it: a shard answered
    // from its cached listing (agentNodes) is then no older than the instance page.
    const guessed = grantsSeen.get(agent);
    const instance = store.nodes.instanceNodes(agent, guessed);
    const [granted, seen, counts, early, firstInstancePage] = await Promise.all([
      store.grantedShards(agent),
      store.agent(agent),
      store.nodes.counts(),
      leasesAndVersions(
        store,
        agent,
        guessed,
        instance.first.then((first) => first.versions),
      ),
      instance.first, // read before any version below
    ]);
    grantsSeen.set(agent, granted);
    const readEarly = new Set(guessed);
    const late = await leasesAndVersions(
      store,
      agent,
      granted.filter((shard) => !readEarly.has(shard)),
    );
    // Only what the fresh grants name counts (a store that lost its keys forgot the rest).
    const grantedNow = new Set(granted);
    const held = new Map([...early.held, ...late.held].filter(([shard]) => grantedNow.has(shard)));
    const versions = new Map([...early.versions, ...late.versions]);
    const mine = [...held]
      .filter(([, lease]) => presented === undefined || presented.includes(lease.token))
      .sort(([a], [b]) => (a < b ? -1 : 1));
    // In the legacy pool whether or not the others count it as up: nova adds its own host.
    const inPool = servesNoShard(seen?.serves, held.keys(), inServiceOf(catalog, counts));
    const ringed = inPool ? await pool.ringFor(agent) : null;
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
    await streamJsonList(
      res,
      head,
      "nodes",
      agentNodes(
        store.nodes,
        shardNodes,
        mine,
        versions,
        { pages: instance.pages, whole: firstInstancePage.whole },
        share,
      ),
    );
  });

  return router;
}
