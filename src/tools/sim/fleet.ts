import { randomUuid } from "../../runtime/random.js";
import { agentIdsOf, type Scenario } from "./scenario.js";

/** The fleet a scenario describes, laid out: node UUIDs, shards, which agents may serve each. */
export interface FleetLayout {
  agents: string[];
  nodes: string[];
  /** node index -> shard index */
  shardOfNode: Int32Array;
  /** nodes per shard */
  shardWeights: Int32Array;
  /** shard index -> agent indexes that may serve it, the first the initial active */
  candidates: number[][];
}

export function layoutFleet(scenario: Scenario, random: () => number): FleetLayout {
  const { fleet } = scenario;
  const agents = agentIdsOf(fleet);
  const nodes = Array.from({ length: fleet.nodes }, () => randomUuid(random));
  const shardOfNode = new Int32Array(fleet.nodes);
  const shardWeights = new Int32Array(fleet.shards);
  for (let n = 0; n < fleet.nodes; n++) {
    shardOfNode[n] = n % fleet.shards;
    shardWeights[n % fleet.shards]!++;
  }
  // Shard s may be served by k consecutive agents from s*k: with shards*k agents each
  // agent serves one shard; with fewer, each serves several.
  const k = fleet.agents_per_shard;
  const candidates = Array.from({ length: fleet.shards }, (_, s) =>
    Array.from({ length: k }, (_, j) => (s * k + j) % agents.length),
  );
  return { agents, nodes, shardOfNode, shardWeights, candidates };
}
