import { expect } from "chai";
import { createApp } from "../src/api/app.js";
import type { BareMetalNode } from "../src/domain/node.js";
import { MemoryNodes } from "../src/nodes/memory.js";
import type { NodePage, NodeQuery } from "../src/nodes/port.js";
import { ShardCatalog } from "../src/shards/definitions.js";
import { processClockUs } from "../src/store/clock.js";
import { MemoryBackend } from "../src/store/memory.js";
import { Store } from "../src/store/store.js";
import { MemoryTraits } from "../src/traits/memory-store.js";
import { call, listen, TEST_TOKENS, testAuthority, wholeNode } from "./helpers/http.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

/**
 * A node leaves the agent's instances for a shard the agent holds while the agent's node
 * list is read. The shard may be answered from a listing kept under its version, so that
 * version must be read no earlier than the instance page. Until this test, it was read in
 * a separate call that, on Redis, ran after the instance page only because it was sent
 * after it on the same connection — not when Redis answers the page's script NOSCRIPT
 * (after a restart, a failover, a SCRIPT FLUSH) and ioredis sends the script again after
 * the rest has run, with another bridge's write in between. No real store shows that on
 * demand, so the one fake here: the embedded node registry's instance listing lets a
 * write land, on a later turn, just before it reads. The code before the versions came in
 * one step with the page (ad34c95, f069ba2) lists the node from neither.
 */
describe("Agent node list: a node moving from the agent's instances into its shard during the list", () => {
  let close: () => Promise<void> = async () => undefined;
  afterEach(() => close());

  it("is listed, from the instances or from the shard: never from neither", async () => {
    const nodes = new MemoryNodes();
    const listNodes = nodes.list.bind(nodes);
    let beforeInstanceRead: (() => Promise<void>) | undefined;
    nodes.list = async (query: NodeQuery): Promise<NodePage> => {
      const interleave = query.source.kind === "instance" ? beforeInstanceRead : undefined;
      beforeInstanceRead = undefined;
      if (interleave !== undefined) await interleave();
      return listNodes(query);
    };
    // Started long ago: leases on new shards are granted at once.
    const store = new Store(new MemoryBackend(processClockUs, 0), nodes, new MemoryTraits());
    const catalog = new ShardCatalog([{ name: "rack-a", description: "", lease_ttl_ms: 60_000 }]);
    const served = await listen(createApp(store, { authority: testAuthority(), catalog }));
    close = served.close;
    const as = TEST_TOKENS.agent("compute-0");
    const moving: BareMetalNode = wholeNode({ uuid: uuid(1) });
    const rack = [2, 3, 4].map((n) => wholeNode({ uuid: uuid(n), shard: "rack-a" }));
    expect((await call(`${served.url}/v1/nodes/bulk`, "POST", { nodes: [moving, ...rack] })).status).to.equal(
      200,
    );
    const lease = await call(`${served.url}/v1/shards/rack-a/lease`, "POST", { agent: "compute-0" }, as);
    const list = async () => {
      const answer = await call(
        `${served.url}/v1/agents/compute-0/nodes?token=${lease.body.token}`,
        "GET",
        undefined,
        as,
      );
      expect(answer.status).to.equal(200);
      return (answer.body.nodes as Array<{ uuid: string; via: string }>)
        .map((n) => `${n.uuid.slice(-1)}:${n.via}`)
        .sort();
    };
    // The shard alone: its listing is kept (under its version), and the grant remembered.
    expect(await list()).to.deep.equal(["2:lease", "3:lease", "4:lease"]);
    // The node's instance lands on the agent: listed from its instances.
    await store.nodes.backend.upsert([{ ...moving, instance_host: "compute-0" }]);
    expect(await list()).to.deep.equal(["1:instance", "2:lease", "3:lease", "4:lease"]);
    // Now it moves into rack-a just before the list reads the agent's instances.
    beforeInstanceRead = async () => {
      await new Promise((resolve) => setImmediate(resolve));
      await store.nodes.backend.upsert([{ ...moving, shard: "rack-a", instance_host: "compute-0" }]);
    };
    expect(await list()).to.deep.equal(["1:lease", "2:lease", "3:lease", "4:lease"]);
    expect(beforeInstanceRead, "the move happened").to.equal(undefined);
  });
});
