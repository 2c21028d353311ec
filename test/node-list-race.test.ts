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

  /** A bridge on the embedded store whose instance listing can be made to wait for a write. */
  async function bridge() {
    const nodes = new MemoryNodes();
    const listNodes = nodes.list.bind(nodes);
    const hook: { beforeInstanceRead?: (() => Promise<void>) | undefined } = {};
    nodes.list = async (query: NodeQuery): Promise<NodePage> => {
      const interleave = query.source.kind === "instance" ? hook.beforeInstanceRead : undefined;
      hook.beforeInstanceRead = undefined;
      if (interleave !== undefined) await interleave();
      return listNodes(query);
    };
    // Started long ago: leases on new shards are granted at once.
    const store = new Store(new MemoryBackend(processClockUs, 0), nodes, new MemoryTraits());
    const catalog = new ShardCatalog(
      ["rack-a", "rack-b"].map((name) => ({ name, description: "", lease_ttl_ms: 60_000 })),
    );
    const served = await listen(createApp(store, { authority: testAuthority(), catalog }));
    close = served.close;
    const lease = async (shard: string, agent: string) =>
      (await call(`${served.url}/v1/shards/${shard}/lease`, "POST", { agent }, TEST_TOKENS.agent(agent))).body
        .token as number;
    const list = async (agent: string, tokens: number[]) => {
      const answer = await call(
        `${served.url}/v1/agents/${agent}/nodes?token=${tokens.join(",")}`,
        "GET",
        undefined,
        TEST_TOKENS.agent(agent),
      );
      expect(answer.status).to.equal(200);
      return (answer.body.nodes as Array<{ uuid: string; via: string }>)
        .map((n) => `${n.uuid.slice(-1)}:${n.via}`)
        .sort();
    };
    /** Move `node` (as given) just before the next instance listing reads, on a later turn. */
    const moveDuringNextList = (node: BareMetalNode) => {
      hook.beforeInstanceRead = async () => {
        await new Promise((resolve) => setImmediate(resolve));
        await store.nodes.backend.upsert([node]);
      };
    };
    return {
      store,
      served,
      lease,
      list,
      moveDuringNextList,
      moved: () => hook.beforeInstanceRead === undefined,
    };
  }

  it("is listed, from the instances or from the shard: never from neither", async () => {
    const { store, served, lease, list, moveDuringNextList, moved } = await bridge();
    const moving: BareMetalNode = wholeNode({ uuid: uuid(1) });
    const rack = [2, 3, 4].map((n) => wholeNode({ uuid: uuid(n), shard: "rack-a" }));
    expect((await call(`${served.url}/v1/nodes/bulk`, "POST", { nodes: [moving, ...rack] })).status).to.equal(
      200,
    );
    const token = await lease("rack-a", "compute-0");
    // The shard alone: its listing is kept (under its version), and the grant remembered.
    expect(await list("compute-0", [token])).to.deep.equal(["2:lease", "3:lease", "4:lease"]);
    // The node's instance lands on the agent: listed from its instances.
    await store.nodes.backend.upsert([{ ...moving, instance_host: "compute-0" }]);
    expect(await list("compute-0", [token])).to.deep.equal(["1:instance", "2:lease", "3:lease", "4:lease"]);
    // Now it moves into rack-a just before the list reads the agent's instances.
    moveDuringNextList({ ...moving, shard: "rack-a", instance_host: "compute-0" });
    expect(await list("compute-0", [token])).to.deep.equal(["1:lease", "2:lease", "3:lease", "4:lease"]);
    expect(moved(), "the move happened").to.equal(true);
  });

  it("is listed when the shard was granted since the agent's last list (its listing kept from another agent's)", async () => {
    const { served, lease, list, moveDuringNextList, moved } = await bridge();
    const moving: BareMetalNode = wholeNode({ uuid: uuid(1), instance_host: "compute-0" });
    const rack = [2, 3].map((n) => wholeNode({ uuid: uuid(n), shard: "rack-b" }));
    await call(`${served.url}/v1/nodes/bulk`, "POST", { nodes: [moving, ...rack] });
    // compute-1 holds rack-b first: the bridge keeps its listing; then hands it over.
    const first = await lease("rack-b", "compute-1");
    expect(await list("compute-1", [first])).to.deep.equal(["2:lease", "3:lease"]);
    await call(
      `${served.url}/v1/shards/rack-b/lease`,
      "DELETE",
      { agent: "compute-1", token: first },
      TEST_TOKENS.agent("compute-1"),
    );
    expect(await list("compute-0", [])).to.deep.equal(["1:instance"]);
    const token = await lease("rack-b", "compute-0");
    moveDuringNextList({ ...moving, shard: "rack-b" });
    expect(await list("compute-0", [token])).to.deep.equal(["1:lease", "2:lease", "3:lease"]);
    expect(moved(), "the move happened").to.equal(true);
  });
});
