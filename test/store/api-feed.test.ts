import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { OwnershipRegistry } from "../../src/core/traits/ownership.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import {
  call,
  postWebhook,
  TEST_TOKENS,
  TEST_WEBHOOK_SECRET,
  testAuthority,
  wholeNode,
} from "../helpers/http.js";

const NODE = "7b0e1d2c-b4a5-4697-8877-665544332211";
const POOL_NODE = "7b0e1d2c-b4a5-4697-8877-665544332212";

for (const backend of backendsUnderTest()) {
  describe(`Trait feed to the active agent: ${backend.name}`, () => {
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, {
        authority: testAuthority(),
        inspector: { rules: [], ownership: new OwnershipRegistry(), secret: TEST_WEBHOOK_SECRET },
      }),
    );
    const as = (agent: string) => TEST_TOKENS.agent(agent);
    const lease = async (agent: string) =>
      (await call(`${ctx.base}/v1/shards/rack-a/lease`, "POST", { agent }, as(agent))).body.token as number;
    const read = (agent: string, token: number) =>
      call(`${ctx.base}/v1/shards/rack-a/feed?token=${token}`, "GET", undefined, as(agent));
    const ack = (agent: string, token: number, id: string) =>
      call(`${ctx.base}/v1/shards/rack-a/feed/ack`, "POST", { token, id }, as(agent));
    const change = (node: string, deltas: string[]) =>
      postWebhook(ctx.base, { kind: "deltas", node, deltas });

    beforeEach(async () => {
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-a" }));
      await call(`${ctx.base}/v1/nodes/${POOL_NODE}`, "PUT", wholeNode({}));
    });

    it("GET /v1/shards shows how long the oldest unacknowledged change has waited, 0 once read", async () => {
      const lagOf = async (name: string) =>
        (
          (await call(`${ctx.base}/v1/shards`, "GET")).body.shards as Array<{
            name: string;
            feed_lag_ms: number | null;
          }>
        ).find((s) => s.name === name)!.feed_lag_ms;
      expect(await lagOf("rack-a")).to.equal(0);
      expect(await lagOf("None")).to.equal(null);
      const token = await lease("compute-0");
      await change(NODE, ["+CUSTOM_LAG_1"]);
      await new Promise((r) => setTimeout(r, 120));
      await change(NODE, ["+CUSTOM_LAG_2"]);
      const asked = performance.now();
      const lag = await lagOf("rack-a");
      // The oldest unread entry's age, not the newest's.
      expect(lag).to.be.within(100, 5000);
      const [first, second] = (await read("compute-0", token)).body.entries;
      await ack("compute-0", token, first.id);
      // Now the second's age: written 120 ms after the first, so at least 100 ms younger than
      // the first was when asked, however long the asking took on a busy machine.
      const later = await lagOf("rack-a");
      expect(later).to.be.at.most(lag! - 100 + (performance.now() - asked));
      await ack("compute-0", token, second.id);
      expect(await lagOf("rack-a")).to.equal(0);
    });

    it("delivers applied deltas in order; acknowledged ones are not delivered again", async () => {
      const token = await lease("compute-0");
      await change(NODE, ["+CUSTOM_A"]);
      await change(NODE, ["+CUSTOM_B", "-CUSTOM_A"]);
      await change(POOL_NODE, ["+CUSTOM_C"]); // unsharded: no shard feed
      const first = await read("compute-0", token);
      expect(first.status).to.equal(200);
      expect(first.body.cursor).to.equal(null);
      expect(first.body.entries.map((e: { deltas: string[] }) => e.deltas)).to.deep.equal([
        ["+CUSTOM_A"],
        ["+CUSTOM_B", "-CUSTOM_A"],
      ]);
      const [e1, e2] = first.body.entries;
      expect(e1).to.include({ node: NODE, generation: 1 });
      expect((await ack("compute-0", token, e1.id)).body.cursor).to.equal(e1.id);
      expect((await read("compute-0", token)).body.entries.map((e: { id: string }) => e.id)).to.deep.equal([
        e2.id,
      ]);
      await ack("compute-0", token, e2.id);
      // Never backwards.
      expect((await ack("compute-0", token, e1.id)).body.cursor).to.equal(e2.id);
      expect((await read("compute-0", token)).body.entries).to.deep.equal([]);
    });

    it("after a failover the new holder resumes from the last acknowledged entry; the old token is refused", async () => {
      const old = await lease("compute-0");
      await change(NODE, ["+CUSTOM_A"]);
      await change(NODE, ["+CUSTOM_B"]);
      const seen = (await read("compute-0", old)).body.entries;
      await ack("compute-0", old, seen[0].id); // crashed before acknowledging the second
      await call(`${ctx.base}/v1/shards/rack-a/lease`, "DELETE", { agent: "compute-0", token: old });
      const fresh = await lease("compute-1");
      const resumed = await read("compute-1", fresh);
      expect(resumed.body.cursor).to.equal(seen[0].id);
      expect(resumed.body.entries.map((e: { deltas: string[] }) => e.deltas)).to.deep.equal([["+CUSTOM_B"]]);

      const stale = await ack("compute-0", old, seen[1].id);
      expect(stale.status).to.equal(409);
      expect(stale.body.errors[0].code).to.equal("shardbridge.lease.stale_token");
      expect((await read("compute-0", old)).status).to.equal(409);
      expect((await read("compute-1", fresh)).body.cursor).to.equal(seen[0].id);
    });

    it("refuses another agent presenting the holder's token as it refuses a wrong one (one answer)", async () => {
      const token = await lease("compute-0");
      const theirs = await read("compute-1", token);
      const wrong = await read("compute-1", token + 1);
      expect(theirs.status).to.equal(409);
      expect(theirs.body.errors[0].code).to.equal("shardbridge.lease.stale_token");
      expect(wrong.status).to.equal(409);
      const said = (answer: { body: { errors: Array<{ detail: string }> } }, t: number) =>
        answer.body.errors[0]!.detail.replace(String(t), "T");
      expect(said(theirs, token), "the same words, but for the token presented").to.equal(
        said(wrong, token + 1),
      );
      expect((await read("compute-0", token)).status).to.equal(200);
    });
  });
}

for (const backend of backendsUnderTest()) {
  describe(`Trait feed when a node changes shard: ${backend.name}`, () => {
    // rack-b carries no node until the test moves one there: defined, so its agent can hold it first.
    const catalog = new ShardCatalog([{ name: "rack-b", description: "", lease_ttl_ms: 6000 }]);
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, {
        authority: testAuthority(),
        catalog,
        inspector: { rules: [], ownership: new OwnershipRegistry(), secret: TEST_WEBHOOK_SECRET },
      }),
    );

    it("delivers the node's whole trait set to its new shard as a snapshot", async () => {
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-a" }));
      await postWebhook(ctx.base, { kind: "deltas", node: NODE, deltas: ["+CUSTOM_B", "+CUSTOM_A"] });
      const agent = "compute-1";
      const token = (
        await call(`${ctx.base}/v1/shards/rack-b/lease`, "POST", { agent }, TEST_TOKENS.agent(agent))
      ).body.token;
      const feedOfB = async () =>
        (
          await call(
            `${ctx.base}/v1/shards/rack-b/feed?token=${token}`,
            "GET",
            undefined,
            TEST_TOKENS.agent(agent),
          )
        ).body.entries;
      expect(await feedOfB()).to.deep.equal([]);
      await call(`${ctx.base}/v1/nodes/bulk`, "POST", {
        nodes: [wholeNode({ uuid: NODE, shard: "rack-b" })],
      });
      const [snapshot] = await feedOfB();
      expect(snapshot).to.deep.include({
        node: NODE,
        deltas: ["+CUSTOM_A", "+CUSTOM_B"],
        generation: 1,
        snapshot: true,
      });
      // A PUT that does not change the shard sends nothing more.
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-b", name: "renamed" }));
      expect(await feedOfB()).to.have.length(1);
    });
  });
}
