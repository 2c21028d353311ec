import type { BareMetalNode } from "../../core/node.js";
import type { LeaseView } from "../../core/lease/machine.js";
import type { NodeRegistry } from "../../store/node-registry.js";
import type { ShardCount } from "../../store/ports/nodes.js";
import type { AgentLiveness } from "../../store/ports/leases.js";
import type { Store } from "../../store/store.js";
import { ShardNodesCache } from "../../store/shard-nodes-cache.js";
import type { ListPage } from "../../runtime/text/json-list.js";
import { nodeJson } from "../../store/node-json.js";

/**
 * An agent's nodes, page by page: the unsharded nodes whose instance is on it, its share
 * of nova's ring (each node read again, so one that left the pool since the share was
 * computed is not listed), then the nodes of each shard it holds (with the token its
 * writes carry). Unsharded nodes come first on purpose: a node that moves from the pool
 * into one of the agent's shards while the list is read (the switch from the ring to
 * shards, see src/core/ring/membership.ts) is then seen in the pool, in the shard, or both —
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
 * What each agent's node list last read: the shards it was granted, and the shards whose
 * node counts it gave (those its record declares and those it was granted). A store's
 * grants only grow (LeaseBackend.grantedTo) and an agent's record changes at a heartbeat
 * that declares other shards, so an agent's next list can read those shards' leases,
 * versions and counts in the same round trip as its grants and record, instead of after
 * them; the grants and record read fresh then say which of those count, and a shard
 * granted or declared since is read in a second round trip as before. Per bridge: a
 * guess, never the answer.
 */
class ListsSeen {
  private readonly byAgent = new Map<string, ListSeen>();

  get(agent: string): ListSeen {
    return this.byAgent.get(agent) ?? NOTHING_SEEN;
  }

  set(agent: string, seen: ListSeen): void {
    if (!this.byAgent.has(agent)) {
      // An id never granted nor declaring anything (an admin's look at any name) has nothing to guess.
      if (seen.granted.length === 0 && seen.counted.length === 0) return;
      if (this.byAgent.size >= REMEMBERED_AGENTS) this.byAgent.clear();
    }
    this.byAgent.set(agent, seen);
  }
}

interface ListSeen {
  granted: readonly string[];
  counted: readonly string[];
}

const NOTHING_SEEN: ListSeen = { granted: [], counted: [] };

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

/** What an agent's node list has read when its answer can start, and what it reads as it goes. */
export interface ListStart {
  seen: AgentLiveness | null;
  counts: ShardCount[];
  /** the live leases the agent holds, by shard, among the shards it was granted */
  held: Map<string, LeaseView>;
  /** for nodes(): the shards' versions, and the agent's instance pages */
  pending: {
    versions: ReadonlyMap<string, number>;
    instance: { pages: AsyncIterable<BareMetalNode[]>; whole: boolean };
  };
}

/** The node counts of `shards` (distinct), in one step; none read when there are none. */
async function countsOf(store: Store, shards: readonly string[]): Promise<Map<string, number>> {
  const counts = await Promise.all(shards.map((shard) => store.nodes.countOf(shard)));
  return new Map(shards.map((shard, i) => [shard, counts[i]!]));
}

/**
 * GET /v1/agents/{id}/nodes's reads, for all agents of one bridge: the shards' listings
 * it keeps (ShardNodesCache) and what each agent's last list read (ListsSeen).
 */
export class AgentNodeLists {
  private readonly shardNodes: ShardNodesCache;
  private readonly listsSeen = new ListsSeen();

  constructor(private readonly store: Store) {
    this.shardNodes = new ShardNodesCache(store.nodes);
  }

  /**
   * One round trip to the store before the answer starts, as a rule: the shards the agent
   * was granted, its record, its first instance page, and the leases, node-list versions
   * and node counts of the shards its last list named (see ListsSeen). A second only for
   * what the fresh grants and record name beyond that: the leases and versions of shards
   * granted since, the counts of shards declared or granted since (is a shard it serves in
   * service?). The counts of those shards only: every shard's counts are one hash of a
   * field a shard, which at 10,000 shards cost more than the rest of a list. The versions
   * come in one step with the instance page, or after it: a shard answered from its kept
   * listing (agentNodes) is then no older than the instance page.
   */
  async start(agent: string): Promise<ListStart> {
    const { store } = this;
    const guessed = this.listsSeen.get(agent);
    const instance = store.nodes.instanceNodes(agent, guessed.granted);
    const [granted, seen, early, earlyCounts, firstInstancePage] = await Promise.all([
      store.grantedShards(agent),
      store.agent(agent),
      leasesAndVersions(
        store,
        agent,
        guessed.granted,
        // Made only where it is read: a promise nobody awaits whose store call fails is an
        // unhandled rejection, which ends the process (an agent's first list in an outage did).
        guessed.granted.length === 0 ? undefined : instance.first.then((first) => first.versions),
      ),
      countsOf(store, guessed.counted),
      instance.first, // read before any version below
    ]);
    const counted = [...new Set([...(seen?.serves ?? []), ...granted])];
    this.listsSeen.set(agent, { granted, counted });
    const readEarly = new Set(guessed.granted);
    const [late, lateCounts] = await Promise.all([
      leasesAndVersions(
        store,
        agent,
        granted.filter((shard) => !readEarly.has(shard)),
      ),
      countsOf(
        store,
        counted.filter((shard) => !earlyCounts.has(shard)),
      ),
    ]);
    // Only what the fresh grants and record name counts (a store that lost its keys forgot
    // the rest; a record may declare other shards now).
    const grantedNow = new Set(granted);
    return {
      seen,
      counts: counted.map((shard) => ({ shard, count: earlyCounts.get(shard) ?? lateCounts.get(shard)! })),
      held: new Map([...early.held, ...late.held].filter(([shard]) => grantedNow.has(shard))),
      pending: {
        versions: new Map([...early.versions, ...late.versions]),
        instance: { pages: instance.pages, whole: firstInstancePage.whole },
      },
    };
  }

  /** The list's nodes, page by page (see agentNodes): `leases` those it lists, `ringShare` nova's ring's. */
  nodes(
    pending: ListStart["pending"],
    leases: Array<[string, LeaseView]>,
    ringShare: readonly string[],
  ): AsyncGenerator<ListPage> {
    return agentNodes(
      this.store.nodes,
      this.shardNodes,
      leases,
      pending.versions,
      pending.instance,
      ringShare,
    );
  }
}
