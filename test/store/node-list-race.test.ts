import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import type { BareMetalNode } from "../../src/core/node.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import type { NodePage, NodeQuery } from "../../src/store/ports/nodes.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { processClockUs } from "../../src/core/lease/clock.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import { Store } from "../../src/store/store.js";
import { MemoryTraits } from "../../src/store/memory/traits.js";
import { call, listen, TEST_TOKENS, testAuthority, uuid, wholeNode } from "../helpers/http.js";

/**
 * A node leaves the agent's pool nodes (its instances, or its share of nova's ring) for a
 * shard the agent holds while the agent's node list is read. The shard may be answered
 * from a listing kept under its version, so that version must be read no earlier than
 * the pool nodes. Until these tests it was read in a separate call that, on Redis, ran
 * after the instance page only because it was sent after it on the same connection — not
 * when Redis answers the page's script NOSCRIPT (after a restart, a failover, a SCRIPT
 * FLUSH) and ioredis sends the script again after the rest has run, with another bridge's
 * write in between — and before the ring share's nodes, always. No real store shows those
 * interleavings on demand, so the one fake here: the embedded node registry's instance
 * listing, or its read of nodes by uuid, lets a write land, on a later turn, just before
 * it reads. The code before (ad34c95, f069ba2) lists the node from neither in every case.
 */
describe("Agent node list: a node moving from the agent's pool nodes into its shard during the list", () => {
  let close: () => Promise<void> = async () => undefined;
  afterEach(() => close());

  /**
   * A bridge on the embedded store whose instance listing, or read of nodes by uuid (nova's
   * ring share), can be made to wait for a write.
   */
  async function bridge() {
    const nodes = new MemoryNodes();
    const listNodes = nodes.list.bind(nodes);
    const getNodes = nodes.getMany.bind(nodes);
    const hook: { beforePoolRead?: (() => Promise<void>) | undefined; readKind?: "instance" | "ring" } = {};
    const interleave = async (kind: "instance" | "ring") => {
      const write = hook.readKind === kind ? hook.beforePoolRead : undefined;
      if (write === undefined) return;
      hook.beforePoolRead = undefined;
      await write();
    };
    nodes.list = async (query: NodeQuery): Promise<NodePage> => {
      if (query.source.kind === "instance") await interleave("instance");
      return listNodes(query);
    };
    nodes.getMany = async (uuids: readonly string[]) => {
      await interleave("ring");
      return getNodes(uuids);
    };
    // Started long ago: leases on new shards are granted at once.
    const store = new Store(new MemoryLeases(processClockUs, 0), nodes, new MemoryTraits());
    const catalog = new ShardCatalog(
      ["rack-a", "rack-b", "rack-c"].map((name) => ({ name, description: "", lease_ttl_ms: 60_000 })),
    );
    const served = await listen(
      bridgeApp(store, { authority: testAuthority(), catalog, legacy: { rebuildMs: 0 } }),
    );
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
    /** Move `node` (as given) just before the next instance listing (or ring read) reads, on a later turn. */
    const moveDuringNextList = (node: BareMetalNode, readKind: "instance" | "ring" = "instance") => {
      hook.readKind = readKind;
      hook.beforePoolRead = async () => {
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
      moved: () => hook.beforePoolRead === undefined,
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

  it("is listed when it moves from the agent's ring share into the shard it holds (migrate apply)", async () => {
    const { served, lease, list, moveDuringNextList, moved } = await bridge();
    // compute-0 is in nova's legacy pool (it declares no shard) and holds rack-c, which has
    // no nodes yet: it stays in the pool. No free node yet: the shard's (empty) listing is kept.
    await call(
      `${served.url}/v1/agents/compute-0/heartbeat`,
      "POST",
      { shards: [] },
      TEST_TOKENS.agent("compute-0"),
    );
    const token = await lease("rack-c", "compute-0");
    expect(await list("compute-0", [token])).to.deep.equal([]);
    // A free node: the only pool member's ring share.
    const free: BareMetalNode = wholeNode({ uuid: uuid(5) });
    await call(`${served.url}/v1/nodes/bulk`, "POST", { nodes: [free] });
    // The ring's share is computed again in the background once the pool changed (the old
    // one served meanwhile, as nova places new nodes at its next periodic task).
    for (let attempt = 0; attempt < 100; attempt++) {
      if ((await list("compute-0", [token])).length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(await list("compute-0", [token])).to.deep.equal(["5:ring"]);
    // migrate apply writes its shard key while the list reads the ring share.
    moveDuringNextList({ ...free, shard: "rack-c" }, "ring");
    expect(await list("compute-0", [token])).to.deep.equal(["5:lease"]);
    expect(moved(), "the move happened").to.equal(true);
  });
});
