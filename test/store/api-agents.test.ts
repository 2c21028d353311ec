import { expect } from "chai";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { backendsUnderTest, storeNowMs, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority, uuid, wholeNode } from "../helpers/http.js";

for (const backend of backendsUnderTest()) {
  describe(`Agents over HTTP: ${backend.name}`, () => {
    const catalog = new ShardCatalog([{ name: "empty", description: "", lease_ttl_ms: 6000 }]);
    const ctx = useApp(backend, (store) => bridgeApp(store, { authority: testAuthority(), catalog }));
    const as = (agent: string) => TEST_TOKENS.agent(agent);

    beforeEach(async () => {
      const nodes = Array.from({ length: 30 }, (_, i) =>
        wholeNode({ uuid: uuid(i + 1), shard: i < 10 ? "rack-a" : i < 20 ? "rack-b" : null }),
      );
      await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes });
    });

    it("lists the nodes of exactly the shards an agent holds, each with the token to present", async () => {
      const nodesOf = (agent: string, tokens: number[]) =>
        call(`${ctx.base}/v1/agents/${agent}/nodes?token=${tokens.join(",")}`, "GET", undefined, as(agent));
      const lease = (agent: string, shard: string) =>
        call(`${ctx.base}/v1/shards/${shard}/lease`, "POST", { agent }, as(agent));
      const a = await lease("compute-0", "rack-a");
      const b = await lease("compute-1", "rack-b");
      const mine = await nodesOf("compute-0", [a.body.token]);
      expect(mine.status).to.equal(200);
      expect(mine.body.leases.map((l: { shard: string }) => l.shard)).to.deep.equal(["rack-a"]);
      expect(mine.body.nodes).to.have.length(10);
      for (const node of mine.body.nodes) expect(node).to.include({ shard: "rack-a", token: a.body.token });

      // After a handover the nodes follow the lease. compute-0 says it serves rack-a (it is
      // not in the legacy ring pool), so without the lease it has no nodes at all.
      await call(
        `${ctx.base}/v1/agents/compute-0/heartbeat`,
        "POST",
        { shards: ["rack-a"] },
        as("compute-0"),
      );
      const release = { agent: "compute-0", token: a.body.token };
      await call(`${ctx.base}/v1/shards/rack-a/lease`, "DELETE", release, as("compute-0"));
      expect((await nodesOf("compute-0", [a.body.token])).body.nodes).to.deep.equal([]);
      const a2 = await lease("compute-1", "rack-a");
      const theirs = await nodesOf("compute-1", [a2.body.token, b.body.token]);
      expect(theirs.body.nodes).to.have.length(20);
    });

    it("follows an agent's grants from one node list to the next: a shard granted since its last list is in the next", async () => {
      const nodesOf = async (agent: string, tokens: number[]) => {
        const list = await call(
          `${ctx.base}/v1/agents/${agent}/nodes?token=${tokens.join(",")}`,
          "GET",
          undefined,
          as(agent),
        );
        expect(list.status).to.equal(200);
        return {
          shards: list.body.leases.map((l: { shard: string }) => l.shard),
          nodes: new Set(
            list.body.nodes.map((n: { shard: string; token: number }) => `${n.shard}@${n.token}`),
          ),
          count: list.body.nodes.length,
        };
      };
      const lease = async (shard: string) =>
        (await call(`${ctx.base}/v1/shards/${shard}/lease`, "POST", { agent: "compute-0" }, as("compute-0")))
          .body.token as number;
      const a = await lease("rack-a");
      expect(await nodesOf("compute-0", [a])).to.deep.include({ shards: ["rack-a"], count: 10 });
      const b = await lease("rack-b");
      // rack-b was granted after the last list: read in the list's second round trip.
      for (let list = 0; list < 2; list++) {
        const both = await nodesOf("compute-0", [a, b]);
        expect(both).to.deep.include({ shards: ["rack-a", "rack-b"], count: 20 });
        expect([...both.nodes].sort()).to.deep.equal([`rack-a@${a}`, `rack-b@${b}`]);
      }
      // Released: the remembered grant of rack-a lists nothing of it.
      await call(
        `${ctx.base}/v1/shards/rack-a/lease`,
        "DELETE",
        { agent: "compute-0", token: a },
        as("compute-0"),
      );
      expect(await nodesOf("compute-0", [a, b])).to.deep.include({ shards: ["rack-b"], count: 10 });
    });

    it("tells an older incarnation of an agent nothing: the new token is not handed out for the old one", async () => {
      const old = await call(
        `${ctx.base}/v1/shards/rack-a/lease`,
        "POST",
        { agent: "compute-0" },
        as("compute-0"),
      );
      // It renewed (so it heard the grant); then a restarted process of it takes a new lease.
      await call(
        `${ctx.base}/v1/shards/rack-a/lease`,
        "POST",
        { agent: "compute-0", token: old.body.token },
        as("compute-0"),
      );
      const again = await call(
        `${ctx.base}/v1/shards/rack-a/lease`,
        "POST",
        { agent: "compute-0" },
        as("compute-0"),
      );
      expect(again.body.token).to.be.greaterThan(old.body.token);
      const stale = await call(
        `${ctx.base}/v1/agents/compute-0/nodes?token=${old.body.token}`,
        "GET",
        undefined,
        as("compute-0"),
      );
      expect(stale.body).to.deep.include({ leases: [], nodes: [] });
      const missing = await call(`${ctx.base}/v1/agents/compute-0/nodes`, "GET", undefined, as("compute-0"));
      expect(missing.status).to.equal(400);
      expect(missing.body.errors[0].field).to.equal("token");
      const bad = await call(
        `${ctx.base}/v1/agents/compute-0/nodes?token=1,x`,
        "GET",
        undefined,
        as("compute-0"),
      );
      expect(bad.status).to.equal(400);
    });

    it("refuses another agent's node list (403) but lets admin read it", async () => {
      expect(
        (await call(`${ctx.base}/v1/agents/compute-0/nodes`, "GET", undefined, as("compute-1"))).status,
      ).to.equal(403);
      expect((await call(`${ctx.base}/v1/agents/compute-0/nodes`, "GET")).status).to.equal(200);
    });

    it("refuses (409) an admin's heartbeat for an id equal to a registered agent's but for case: nova's ring would make them one host", async () => {
      expect(
        (await call(`${ctx.base}/v1/agents/compute-0/heartbeat`, "POST", { shards: [] })).status,
      ).to.equal(200);
      const twin = await call(`${ctx.base}/v1/agents/COMPUTE-0/heartbeat`, "POST", { shards: [] });
      expect(twin.status).to.equal(409);
      expect(twin.body.errors[0]).to.include({ code: "shardbridge.agent.host_twin" });
      expect(twin.body.errors[0].detail).to.match(/forget it first \(DELETE \/v1\/agents\/compute-0\)/);
      const agents = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents;
      expect(agents.map((a: { id: string }) => a.id)).to.deep.equal(["compute-0"]);
      // The ring's 10 unsharded nodes are compute-0's; the twin's list is refused, not handed the same share.
      const nodesOf = (agent: string) => call(`${ctx.base}/v1/agents/${agent}/nodes`, "GET");
      expect((await nodesOf("compute-0")).body.nodes).to.have.length(10);
      const twinList = await nodesOf("COMPUTE-0");
      expect(twinList.status).to.equal(409);
      expect(twinList.body.errors[0]).to.include({ code: "shardbridge.agent.host_twin" });
    });

    it("records heartbeats and lists agents: last seen, up, shards held", async () => {
      const before = await storeNowMs(ctx.store);
      const beat = await call(
        `${ctx.base}/v1/agents/compute-0/heartbeat`,
        "POST",
        { shards: [] },
        as("compute-0"),
      );
      expect(beat.status).to.equal(200);
      expect(Date.parse(beat.body.last_seen), "last seen by the store's clock").to.be.within(
        before,
        await storeNowMs(ctx.store),
      );
      expect(
        (await call(`${ctx.base}/v1/agents/compute-0/heartbeat`, "POST", { shards: [] }, as("compute-1")))
          .status,
      ).to.equal(403);
      await call(`${ctx.base}/v1/shards/rack-b/lease`, "POST", { agent: "compute-1" }, as("compute-1"));
      const { agents } = (await call(`${ctx.base}/v1/agents`, "GET")).body;
      expect(agents.find((a: { id: string }) => a.id === "compute-0")).to.include({ up: true });
      expect(agents.find((a: { id: string }) => a.id === "compute-0").shards).to.deep.equal([]);
      // compute-1 never sent a heartbeat, but it holds a shard: it shows, as down.
      expect(agents.find((a: { id: string }) => a.id === "compute-1")).to.deep.include({
        up: false,
        shards: ["rack-b"],
      });
    });

    it("two processes of one agent id heartbeating their own shards: its serves and pool membership hold still", async () => {
      // An `agent` serving rack-a (it carries nodes: out of nova's pool) and a second process
      // of the same id that serves nothing, each a client of its own, as the commands are.
      const serving = new BridgeClient(ctx.base, as("compute-0"));
      const idle = new BridgeClient(ctx.base, as("compute-0"));
      const row = async () =>
        ((await call(`${ctx.base}/v1/agents`, "GET")).body.agents as Array<{ id: string }>).find(
          (a) => a.id === "compute-0",
        );
      for (let i = 0; i < 3; i++) {
        await serving.heartbeat("compute-0", ["rack-a"]);
        expect(await row(), `after rack-a's process, round ${i}`).to.deep.include({
          serves: ["rack-a"],
          legacy_pool: false,
        });
        await idle.heartbeat("compute-0", []);
        expect(await row(), `after the other process, round ${i}`).to.deep.include({
          serves: ["rack-a"],
          legacy_pool: false,
        });
      }
      // The process serving rack-a says it serves nothing now: at once, not after a window.
      await serving.heartbeat("compute-0", []);
      expect(await row()).to.deep.include({ serves: [], legacy_pool: true });
    });

    it("answers 400 for a bad agent id in the path", async () => {
      const bad = await call(`${ctx.base}/v1/agents/${"x".repeat(256)}/nodes`, "GET");
      expect(bad.status).to.equal(400);
      expect(bad.body.errors[0].field).to.equal("id");
    });
  });
}
