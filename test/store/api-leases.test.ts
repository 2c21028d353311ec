import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority, uuid, wholeNode } from "../helpers/http.js";
import { until } from "../helpers/until.js";

const shardNames = async (base: string): Promise<string[]> =>
  (await call(`${base}/v1/shards`, "GET")).body.shards.map((s: { name: string }) => s.name);

for (const backend of backendsUnderTest()) {
  describe(`Lease HTTP routes: ${backend.name}`, () => {
    const catalog = new ShardCatalog([{ name: "s1", description: "", lease_ttl_ms: 6000 }]);
    const ctx = useApp(backend, (store) => bridgeApp(store, { authority: testAuthority(), catalog }));

    it("acquires, refuses a second agent with 409 naming the holder, fences, releases with 204", async () => {
      const got = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-a" });
      expect(got.status).to.equal(200);
      expect(got.body).to.include({ shard: "s1", holder: "compute-a", ttl_ms: 6000 });
      const token = got.body.token as number;

      const refused = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-b" });
      expect(refused.status).to.equal(409);
      expect(refused.body.errors[0]).to.include({ status: 409, code: "shardbridge.lease.held" });
      expect(refused.body.errors[0].detail).to.match(/held by compute-a for \d+ ms more/);

      expect((await call(`${ctx.base}/v1/shards/s1/fence`, "POST", { token })).body).to.deep.equal({
        allowed: true,
      });
      expect((await call(`${ctx.base}/v1/shards/s1/fence`, "POST", { token: token - 1 })).body).to.deep.equal(
        {
          allowed: false,
        },
      );

      expect(
        (await call(`${ctx.base}/v1/shards/s1/lease`, "DELETE", { agent: "compute-a", token })).status,
      ).to.equal(204);
      const next = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-b" });
      expect(next.status).to.equal(200);
      expect(next.body.token).to.be.greaterThan(token);
    });

    it("a grant answers its fence key once; the fence route answers another agent's live token as a wrong one", async () => {
      const asA = TEST_TOKENS.agent("compute-a");
      const asB = TEST_TOKENS.agent("compute-b");
      const got = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-a" }, asA);
      expect(got.body.fence_key).to.match(/^[0-9a-f]{32}$/);
      const token = got.body.token as number;
      const renewed = await call(
        `${ctx.base}/v1/shards/s1/lease`,
        "POST",
        { agent: "compute-a", token },
        asA,
      );
      expect(renewed.body, "a renew does not answer the key again").to.not.have.property("fence_key");
      const read = await call(`${ctx.base}/v1/shards/s1/lease`, "GET");
      expect(JSON.stringify(read.body), "no read shows the key").to.not.include(got.body.fence_key);

      const fence = async (presented: number, as: string) =>
        call(`${ctx.base}/v1/shards/s1/fence`, "POST", { token: presented }, as);
      const theirs = await fence(token, asB);
      const wrong = await fence(token + 1, asB);
      expect([theirs.status, theirs.body]).to.deep.equal([200, { allowed: false }]);
      expect([wrong.status, wrong.body]).to.deep.equal([200, { allowed: false }]);
      expect((await fence(token, asA)).body).to.deep.equal({ allowed: true });
      await call(`${ctx.base}/v1/shards/s1/lease`, "DELETE", { agent: "compute-a", token }, asA);
    });

    it("an acquire with wait_ms is answered at the release: the first waiter granted, the next told who holds it, both with waited_ms", async () => {
      const lease = `${ctx.base}/v1/shards/s1/lease`;
      const waitingAcquires = async () => {
        const text = await (await fetch(`${ctx.base}/metrics`)).text();
        return Number(/^shardbridge_lease_waiting_acquires (\d+)$/m.exec(text)?.[1]);
      };
      const held = await call(lease, "POST", { agent: "compute-a" });
      expect(held.status).to.equal(200);
      expect(held.body, "no wait asked, none reported").to.not.have.property("waited_ms");
      // Each waiter seen waiting by the bridge's own gauge before the next step: which one
      // came first is then the bridge's order, not the test's scheduling.
      const first = call(lease, "POST", { agent: "compute-b", wait_ms: 5000 });
      await until("the first waiter waiting", waitingAcquires, (n) => n === 1, 5000);
      const second = call(lease, "POST", { agent: "compute-9", wait_ms: 5000 });
      await until("both waiting", waitingAcquires, (n) => n === 2, 5000);
      await new Promise((r) => setTimeout(r, 50));
      await call(lease, "DELETE", { agent: "compute-a", token: held.body.token });
      const [granted, told] = await Promise.all([first, second]);
      expect(granted.status).to.equal(200);
      expect(granted.body).to.include({ holder: "compute-b" });
      expect(granted.body.waited_ms).to.be.at.least(50);
      expect(told.status).to.equal(409);
      expect(told.body.errors[0]).to.include({ code: "shardbridge.lease.held" });
      expect(told.body.errors[0].lease).to.include({ holder: "compute-b" });
      expect(told.body.errors[0].waited_ms).to.be.at.least(20);
    });

    it("answers 400 naming each bad field, and stores nothing", async () => {
      const bad = await call(`${ctx.base}/v1/shards/no%20spaces/lease`, "POST", { agent: "" });
      expect(bad.status).to.equal(400);
      expect(bad.body.errors.map((e: { field: string }) => e.field).sort()).to.deep.equal(["agent", "shard"]);
      const extra = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "a", ttl: 5 });
      expect(extra.status).to.equal(400);
      expect(extra.body.errors[0].detail).to.match(/ttl/);
      // A field an agent may not send is named beside the other findings, in one answer.
      const both = await call(`${ctx.base}/v1/shards/no%20spaces/lease`, "POST", { agent: "", ttl: 5 });
      expect(both.status).to.equal(400);
      expect(both.body.errors.map((e: { field: string }) => e.field).sort()).to.deep.equal([
        "agent",
        "shard",
        "ttl",
      ]);
      const renewExtra = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "a", token: 1, x: 1 });
      expect(renewExtra.status).to.equal(400);
      expect(renewExtra.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(["x"]);
      const typed = await call(`${ctx.base}/v1/shards/s1/fence`, "POST", { token: "12" });
      expect(typed.status).to.equal(400);
      expect(typed.body.errors[0].field).to.equal("token");
      const malformed = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", '{"agent":');
      expect(malformed.status).to.equal(400);
      expect(malformed.body.errors[0].code).to.equal("shardbridge.body.malformed");
      const huge = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", {
        agent: "a",
        pad: "x".repeat(1024 * 1024),
      });
      expect(huge.status).to.equal(413);
      expect(await backend.storedKeys(ctx.store)).to.equal(0);
    });

    it("refuses a lease on a shard nothing defines or carries (404 naming it, nothing written) until a node carries it", async () => {
      const refused = await call(`${ctx.base}/v1/shards/rakc-7/lease`, "POST", { agent: "compute-a" });
      expect(refused.status).to.equal(404);
      expect(refused.body.errors[0]).to.include({ code: "shardbridge.shard.undefined" });
      expect(refused.body.errors[0].detail).to.match(
        /^shard rakc-7 is not defined \(shards\/rakc-7\.json or PUT \/v1\/shard-definitions\/rakc-7\) and no node carries it/,
      );
      expect(await backend.storedKeys(ctx.store)).to.equal(0);
      expect(await shardNames(ctx.base)).not.to.include("rakc-7");
      expect((await call(`${ctx.base}/v1/shards/rakc-7`, "GET")).status).to.equal(404);
      // A shard key from Ironic is a shard: nobody has to define it here as well.
      expect(
        (await call(`${ctx.base}/v1/nodes/${uuid(7)}`, "PUT", wholeNode({ shard: "rakc-7" }))).status,
      ).to.equal(201);
      expect(
        (await call(`${ctx.base}/v1/shards/rakc-7/lease`, "POST", { agent: "compute-a" })).status,
      ).to.equal(200);
    });

    it("forgets a shard leased by mistake (admin, 204), only once it is undefined, empty and free; its tokens still climb", async () => {
      const id = uuid(8);
      await call(`${ctx.base}/v1/nodes/${id}`, "PUT", wholeNode({ shard: "gone-rack" }));
      const first = await call(`${ctx.base}/v1/shards/gone-rack/lease`, "POST", { agent: "compute-a" });
      const forget = () => call(`${ctx.base}/v1/shards/gone-rack`, "DELETE");
      expect((await forget()).body.errors[0].code).to.equal("shardbridge.shard.carries_nodes");
      await call(`${ctx.base}/v1/nodes/${id}`, "DELETE");
      const held = await forget();
      expect(held.status).to.equal(409);
      expect(held.body.errors[0]).to.include({ code: "shardbridge.lease.held" });
      expect(held.body.errors[0].detail).to.match(/held by compute-a/);
      expect((await call(`${ctx.base}/v1/shards/s1`, "DELETE")).body.errors[0].code).to.equal(
        "shardbridge.shard.defined",
      );
      expect(
        (await call(`${ctx.base}/v1/shards/gone-rack`, "DELETE", undefined, TEST_TOKENS.agent("compute-a")))
          .status,
      ).to.equal(403);
      await call(`${ctx.base}/v1/shards/gone-rack/lease`, "DELETE", {
        agent: "compute-a",
        token: first.body.token,
      });
      expect(await shardNames(ctx.base)).to.include("gone-rack");
      expect((await forget()).status).to.equal(204);
      expect(await shardNames(ctx.base)).not.to.include("gone-rack");
      expect((await call(`${ctx.base}/v1/shards/gone-rack`, "GET")).status).to.equal(404);
      expect((await forget()).status).to.equal(404);
      // Leasable again once a node carries it; the token climbs above the forgotten one.
      await call(`${ctx.base}/v1/nodes/${id}`, "PUT", wholeNode({ shard: "gone-rack" }));
      const again = await call(`${ctx.base}/v1/shards/gone-rack/lease`, "POST", { agent: "compute-b" });
      expect(again.body.token).to.be.greaterThan(first.body.token);
      expect(await shardNames(ctx.base)).to.include("gone-rack");
    });

    it("reports readiness of the store", async () => {
      const ready = await call(`${ctx.base}/readyz`, "GET");
      expect(ready.status).to.equal(200);
      expect(ready.body).to.include({ status: "ready", store: backend.name });
    });
  });
}
