import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { parseTokens } from "../../src/runtime/tokens-file.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { memoryUnderTest, useApp } from "../helpers/backends.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { TEST_TOKENS, call, testAuthority, wholeNode } from "../helpers/http.js";

describe("API edges an operator meets", () => {
  const backend = memoryUnderTest();
  const ctx = useApp(backend, (store) =>
    // A bridge that leases any name (serve --allow-undefined-shards): "ghost" below.
    bridgeApp(store, { authority: testAuthority(), catalog: new ShardCatalog([], true) }),
  );

  it("answers an unknown route with a 404 in the API-SIG shape", async () => {
    const res = await call(`${ctx.base}/v1/nope`, "GET");
    expect(res.status).to.equal(404);
    expect(res.body.errors[0]).to.include({ code: "shardbridge.route.not_found", detail: "GET /v1/nope" });
  });

  it("authenticates before it reads a body: malformed JSON without a token is a 401", async () => {
    expect((await call(`${ctx.base}/v1/nodes/bulk`, "POST", '{"nodes":', null)).status).to.equal(401);
  });

  it("answers a body it cannot decode with a 4xx, not a store outage", async () => {
    const res = await fetch(`${ctx.base}/v1/shards/s1/fence`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TEST_TOKENS.admin}`,
        "content-type": "application/json",
        "content-encoding": "zstd",
      },
      body: '{"token":1}',
    });
    expect(res.status).to.equal(415);
    const body = (await res.json()) as { errors: Array<{ code: string }> };
    expect(body.errors[0]!.code).to.equal("shardbridge.body.invalid");
  });

  it('refuses "None" as a shard name: it names the unsharded nodes', async () => {
    const res = await call(
      `${ctx.base}/v1/nodes/00000000-0000-4000-8000-000000000001`,
      "PUT",
      wholeNode({ shard: "None" }),
    );
    expect(res.status).to.equal(400);
    expect(res.body.errors[0].field).to.equal("shard");
    expect(await backend.storedKeys(ctx.store)).to.equal(0);
  });

  it("shows a lease on a shard that has neither nodes nor a definition (--allow-undefined-shards)", async () => {
    await call(
      `${ctx.base}/v1/shards/ghost/lease`,
      "POST",
      { agent: "compute-0" },
      TEST_TOKENS.agent("compute-0"),
    );
    const shards = (await call(`${ctx.base}/v1/shards`, "GET")).body.shards;
    expect(shards.find((s: { name: string }) => s.name === "ghost")).to.deep.include({ count: 0 });
    expect(shards.find((s: { name: string }) => s.name === "ghost").lease.holder).to.equal("compute-0");
    const agents = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents;
    expect(agents.find((a: { id: string }) => a.id === "compute-0").shards).to.deep.equal(["ghost"]);
  });

  it("refuses a tokens file that lists one secret twice, naming the entry", () => {
    const doc = JSON.stringify({
      tokens: [
        { role: "admin", token: "same-secret-0123456789" },
        { role: "agent", agent: "a", token: "same-secret-0123456789" },
      ],
    });
    expect(() => parseTokens(doc, "tokens file t.json")).to.throw(
      /^tokens file t\.json: tokens\[1\]\.token: repeats tokens\[0\]\.token$/,
    );
  });

  it("refuses a token that begins or ends with white space (it could never be presented), naming it", () => {
    for (const token of [
      "trailing-newline-0123456789\n",
      " leading-space-0123456789",
      "tab-at-end-0123456789\t",
    ]) {
      const doc = JSON.stringify({
        tokens: [
          { role: "admin", token: "an-admin-token-0123456789" },
          { role: "viewer", token },
        ],
      });
      expect(() => parseTokens(doc, "tokens file t.json"), JSON.stringify(token)).to.throw(
        /^tokens file t\.json: tokens\[1\]\.token: must not begin or end with a space or a newline/,
      );
    }
  });
});

describe("The reference agent refused for good (a token, a shard)", function () {
  this.timeout(30_000);
  let bridge: BridgeProcess;
  before(async () => {
    bridge = await startBridge({ shards: [{ name: "rack", lease_ttl_ms: 1000 }], agents: ["compute-0"] });
  });
  after(() => bridge?.stop());

  /** Run `agent` on `shard` under `token` until it gives up: its one fatal line, once it exited 2. */
  async function fatalOf(shard: string, token: string): Promise<string> {
    const agent = AgentProcess.cli("agent", [
      ...["agent", "--id", "compute-0", "--shard", shard, "--bridge", bridge.url, "--token", token],
    ]);
    const fatal = await agent.waitFor((e) => e.ev === "fatal", 10_000);
    await agent.exited();
    expect(agent.child.exitCode).to.equal(2);
    return String(fatal.error);
  }

  it("says so once and exits 2 instead of retrying forever", async () => {
    expect(await fatalOf("rack", "not-the-right-token-0123")).to.match(/401/);
  });

  it("says so once and exits 2 for a shard the bridge does not lease (a typo'd --shard)", async () => {
    expect(await fatalOf("rakc", bridge.tokenOf("compute-0"))).to.match(
      /^BridgeError: 404 shardbridge\.shard\.undefined: shard rakc is not defined/,
    );
  });
});
