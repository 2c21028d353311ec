import type { AgentSummary } from "../../contracts/agents.js";
import type { ShardSummary } from "../../contracts/shards.js";
import type { LeaseView } from "../../core/lease/machine.js";
import { legacyPoolMembers } from "../../core/ring/membership.js";
import type { ShardCount } from "../../store/ports/nodes.js";
import type { ShardCatalog } from "./catalog.js";
import { feedLags, heldByAgent, inServiceOf, knownShards, liveLeases } from "./queries.js";
import type { Store } from "../../store/store.js";
import { leaseJson } from "./lease-json.js";

/*
 * What the bridge shows of its shards and agents, read from the store in the shapes of
 * GET /v1/shards and GET /v1/agents (the Ironic delivery's: ironic/delivery-overview.ts). The routes
 * answer with these, and the status page pushes the same (see api/ui/), so the page, the API
 * and `shardbridge status` (which reads the API) never disagree.
 */

/** How Ironic names the unsharded pool in GET /v1/shards: the string "None". */
export const UNSHARDED_NAME = "None";

/** The live lease of every shard the bridge knows of, and the node count of each place. */
export interface LeaseCensus {
  counts: Map<string | null, number>;
  leases: Map<string, LeaseView>;
}

/**
 * Every known shard (defined, carrying nodes, or with lease state) with its node count
 * (0 for none) and the unsharded pool's, and the live leases: one read of each.
 */
export async function leaseCensus(store: Store, catalog: ShardCatalog): Promise<LeaseCensus> {
  const nodeCounts = await store.nodes.counts();
  const known = await knownShards(store, catalog, nodeCounts);
  const counts = new Map<string | null, number>([...known].map((shard) => [shard, 0]));
  for (const { shard, count } of nodeCounts) counts.set(shard, count);
  return { counts, leases: await liveLeases(store, known) };
}

/**
 * The rows of GET /v1/shards, most nodes first: Ironic's {name, count} plus description,
 * live lease (tokens only where `showTokens`) and feed lag.
 */
export async function shardsOverview(
  store: Store,
  catalog: ShardCatalog,
  { counts, leases }: LeaseCensus,
  showTokens: boolean,
): Promise<ShardSummary[]> {
  const named = [...counts.keys()].filter((shard): shard is string => shard !== null);
  const lags = await feedLags(store, named);
  const shards = [...counts].map(([shard, count]) => {
    const lease = shard === null ? undefined : leases.get(shard);
    return {
      name: shard ?? UNSHARDED_NAME,
      count,
      description: shard === null ? "" : (catalog.get(shard)?.description ?? ""),
      lease: lease === undefined ? null : leaseJson(lease, showTokens),
      // the unsharded pool has no feed: nobody is active for it
      feed_lag_ms: shard === null ? null : (lags.get(shard) ?? 0),
    };
  });
  shards.sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
  return shards;
}

/**
 * The rows of GET /v1/agents: every agent heard from (up: heard within `serviceDownMs`),
 * the shards each holds, what it serves, whether it is in nova's legacy ring pool (by the
 * rule of src/core/ring/membership.ts: a shard takes its agent out once it carries nodes and
 * is not filling); and a holder that never sent a heartbeat, since it holds shards.
 */
export async function agentsOverview(
  store: Store,
  catalog: ShardCatalog,
  { counts, leases }: LeaseCensus,
  serviceDownMs: number,
): Promise<AgentSummary[]> {
  const seen = await store.agents();
  const held = heldByAgent(leases);
  const inService = inServiceOf(
    catalog,
    [...counts].map(([shard, count]): ShardCount => ({ shard, count })),
  );
  const pool = new Set(legacyPoolMembers(seen, held, inService, serviceDownMs));
  const agents: AgentSummary[] = seen.map((s) => ({
    id: s.agent,
    last_seen: new Date(s.lastSeenMs).toISOString(),
    age_ms: s.ageMs,
    up: s.ageMs <= serviceDownMs,
    shards: held.get(s.agent) ?? [],
    serves: s.serves,
    legacy_pool: pool.has(s.agent.toLowerCase()),
  }));
  const heard = new Set(seen.map((s) => s.agent));
  for (const [agent, shards] of held)
    if (!heard.has(agent))
      agents.push({
        id: agent,
        last_seen: "",
        age_ms: -1,
        up: false,
        shards,
        serves: [],
        legacy_pool: false,
      });
  return agents;
}
