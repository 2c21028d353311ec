import { expect } from "chai";
import { AgentNodeLists } from "../../src/bridge/shards/agent-nodes.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { uuid, wholeNode } from "../helpers/http.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/**
 * An agent's node list reads, with its grants and record, what its last list read (the
 * leases, versions and counts of the shards it named): one round trip before the answer
 * when nothing changed. Only the fresh grants and record say which of those count.
 */
describe("AgentNodeLists.start on a real redis-server: what the last list read, and what counts", function () {
  this.timeout(30_000);
  let server: TestRedisServer;
  let store: Store;
  let lists: AgentNodeLists;
  /** Whether the agent's grants had been answered when each node count was asked for. */
  let countsAsked: Array<{ shard: string; afterGrants: boolean }>;

  before(async () => {
    server = await TestRedisServer.start();
    store = await openStore(server.url);
    let n = 0;
    for (const [shard, nodes] of [
      ["rack-a", 2],
      ["rack-b", 3],
      ["rack-c", 1],
    ] as const)
      for (let i = 0; i < nodes; i++) await store.nodes.put(uuid(++n), wholeNode({ shard }));
    // Which round trip each count goes out in: before the grants are answered, or after.
    let grantsAnswered = false;
    const grantedShards = store.grantedShards.bind(store);
    store.grantedShards = async (agent) => {
      const granted = await grantedShards(agent);
      grantsAnswered = true;
      return granted;
    };
    const countOf = store.nodes.countOf.bind(store.nodes);
    store.nodes.countOf = (shard) => {
      countsAsked.push({ shard, afterGrants: grantsAnswered });
      return countOf(shard);
    };
    lists = new AgentNodeLists(store);
    const start = lists.start.bind(lists);
    lists.start = (agent) => {
      grantsAnswered = false;
      countsAsked = [];
      return start(agent);
    };
  });
  after(async () => {
    await store?.close();
    await server?.stop();
  });

  it("counts what the record declares and the grants name, each read once; the same again in one round trip", async () => {
    await store.heartbeat("compute-1", ["rack-a"]);
    await acquireWhenReady(store, "rack-b", "compute-1");
    const first = await lists.start("compute-1");
    expect(first.counts).to.deep.equal([
      { shard: "rack-a", count: 2 },
      { shard: "rack-b", count: 3 },
    ]);
    expect([...first.held.keys()]).to.deep.equal(["rack-b"]);
    expect(
      countsAsked.every((c) => c.afterGrants),
      "nothing to guess from on a first list",
    ).to.equal(true);

    const again = await lists.start("compute-1");
    expect(again.counts).to.deep.equal(first.counts);
    expect(countsAsked.map((c) => c.shard)).to.deep.equal(["rack-a", "rack-b"]);
    expect(
      countsAsked.filter((c) => c.afterGrants),
      "a count asked for after the grants came back (a second round trip)",
    ).to.deep.equal([]);
  });

  it("a shard the record no longer declares is not counted, one it declares now is, in the second round trip", async () => {
    await store.heartbeat("compute-1", ["rack-c"]);
    const changed = await lists.start("compute-1");
    expect(changed.counts).to.deep.equal([
      { shard: "rack-c", count: 1 },
      { shard: "rack-b", count: 3 },
    ]);
    expect(countsAsked.filter((c) => c.afterGrants).map((c) => c.shard)).to.deep.equal(["rack-c"]);

    await store.heartbeat("compute-1", []);
    const none = await lists.start("compute-1");
    expect(none.counts, "rack-c, read early on the guess, left out").to.deep.equal([
      { shard: "rack-b", count: 3 },
    ]);
  });
});
