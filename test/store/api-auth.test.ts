import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TokenAuthority } from "../../src/api/http/auth.js";
import { devTokens, parseTokens, readTokensFile } from "../../src/runtime/tokens-file.js";
import { ConfigError } from "../../src/runtime/config.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { memoryUnderTest, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";

const NODE = "00000000-0000-4000-8000-000000000001";

describe("Auth: bearer tokens per role", () => {
  const catalog = new ShardCatalog([
    { name: "locked", description: "", lease_ttl_ms: 6000, agents: ["compute-0"] },
    { name: "s1", description: "", lease_ttl_ms: 6000 },
    { name: "s2", description: "", lease_ttl_ms: 6000 },
  ]);
  const backend = memoryUnderTest();
  const ctx = useApp(backend, (store) => bridgeApp(store, { authority: testAuthority(), catalog }));
  const agent0 = TEST_TOKENS.agent("compute-0");
  const agent1 = TEST_TOKENS.agent("compute-1");

  it("answers 401 without a token or with an unknown one, with WWW-Authenticate", async () => {
    for (const token of [null, "not-a-known-token-at-all"]) {
      const res = await fetch(`${ctx.base}/v1/shards`, {
        headers: token === null ? {} : { authorization: `Bearer ${token}` },
      });
      expect(res.status).to.equal(401);
      expect(res.headers.get("www-authenticate")).to.match(/^Bearer realm="shardbridge"/);
      const body = (await res.json()) as { errors: Array<{ code: string }> };
      expect(body.errors[0]!.code).to.equal("shardbridge.auth.unauthenticated");
    }
    const basic = await fetch(`${ctx.base}/v1/shards`, {
      headers: { authorization: `Basic ${TEST_TOKENS.admin}` },
    });
    expect(basic.status).to.equal(401);
  });

  it("leaves health checks open", async () => {
    expect((await call(`${ctx.base}/healthz`, "GET", undefined, null)).status).to.equal(200);
    expect((await call(`${ctx.base}/readyz`, "GET", undefined, null)).status).to.equal(200);
  });

  it("lets an agent act only as itself: 403 for another agent's id, nothing written", async () => {
    const own = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-0" }, agent0);
    expect(own.status).to.equal(200);
    const other = await call(`${ctx.base}/v1/shards/s2/lease`, "POST", { agent: "compute-0" }, agent1);
    expect(other.status).to.equal(403);
    expect(other.body.errors[0].code).to.equal("shardbridge.auth.forbidden");
    expect(other.body.errors[0].detail).to.match(/belongs to agent compute-1, not compute-0/);
    const release = await call(
      `${ctx.base}/v1/shards/s1/lease`,
      "DELETE",
      { agent: "compute-0", token: own.body.token },
      agent1,
    );
    expect(release.status).to.equal(403);
    expect((await call(`${ctx.base}/v1/shards/s2/lease`, "GET")).body.lease).to.equal(null);
    expect((await call(`${ctx.base}/v1/shards/s1/lease`, "GET")).body.lease.holder).to.equal("compute-0");
  });

  it("refuses an agent a shard its definition does not list (403)", async () => {
    const refused = await call(`${ctx.base}/v1/shards/locked/lease`, "POST", { agent: "compute-1" }, agent1);
    expect(refused.status).to.equal(403);
    expect(refused.body.errors[0].code).to.equal("shardbridge.shard.agent_not_allowed");
  });

  it("keeps node writes to admin: 403 for agent and inspector, nothing written", async () => {
    for (const token of [agent0, TEST_TOKENS.inspector]) {
      expect(
        (await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "s1" }), token)).status,
      ).to.equal(403);
      expect(
        (await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes: [wholeNode({ uuid: NODE })] }, token))
          .status,
      ).to.equal(403);
      expect((await call(`${ctx.base}/v1/nodes/${NODE}`, "DELETE", undefined, token)).status).to.equal(403);
    }
    expect(await backend.storedKeys(ctx.store)).to.equal(0);
  });

  it("keeps the inspector away from leases and fencing", async () => {
    expect(
      (await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-0" }, TEST_TOKENS.inspector))
        .status,
    ).to.equal(403);
    expect(
      (await call(`${ctx.base}/v1/shards/s1/fence`, "POST", { token: 1 }, TEST_TOKENS.inspector)).status,
    ).to.equal(403);
  });

  it("keeps inspector and viewer tokens from heartbeating as an agent: 403 naming the roles, nothing recorded", async () => {
    // A viewer is refused any write first (viewersRead), an inspector by the declared roles.
    const refusals: Array<[string, RegExp]> = [
      [TEST_TOKENS.inspector, /^role inspector may not do this; it takes agent or admin$/],
      [TEST_TOKENS.viewer, /^the viewer role reads only; POST /],
    ];
    for (const [token, why] of refusals) {
      const heartbeat = `${ctx.base}/v1/agents/compute-9/heartbeat`;
      const refused = await call(heartbeat, "POST", { shards: ["s1"] }, token);
      expect(refused.status).to.equal(403);
      expect(refused.body.errors[0].detail).to.match(why);
      const listed = await call(`${ctx.base}/v1/agents/compute-9/nodes`, "GET", undefined, token);
      expect(listed.status).to.equal(403);
    }
    const agents = await call(`${ctx.base}/v1/agents`, "GET");
    expect(agents.body.agents.map((a: { agent: string }) => a.agent)).to.not.include("compute-9");
  });

  it("lets admin act for any agent (an operator handing back a stuck lease)", async () => {
    const held = await call(`${ctx.base}/v1/shards/s1/lease`, "POST", { agent: "compute-1" }, agent1);
    const released = await call(`${ctx.base}/v1/shards/s1/lease`, "DELETE", {
      agent: "compute-1",
      token: held.body.token,
    });
    expect(released.status).to.equal(204);
  });

  it("compares tokens by digest: each dev token identifies its own principal", () => {
    const file = devTokens(["compute-0", "compute-1"]);
    const authority = new TokenAuthority(file);
    for (const entry of file.tokens) {
      const { token, ...principal } = entry;
      expect(authority.identify(token)).to.deep.equal(principal);
    }
    expect(authority.identify(`${file.tokens[0]!.token}x`)).to.equal(null);
    expect(new Set(file.tokens.map((t) => t.token)).size).to.equal(5);
  });

  it("loads only tokens a Bearer header can carry (RFC 6750's b64token), naming the entry and never the secret", () => {
    const good = ["abcdefghijklmnop", "A-b.c_d~e+f/0123456789==", devTokens(["a"]).tokens[0]!.token];
    const doc = (token: string) =>
      JSON.stringify({
        tokens: [
          { role: "admin", token: "admin-token-0123456789" },
          { role: "viewer", token },
        ],
      });
    for (const token of good) expect(parseTokens(doc(token), "t.json").tokens[1]!.token).to.equal(token);
    const bad: Array<[string, string]> = [
      ["viewer token 0123456789", "not white space"],
      ["viewer\ttoken0123456789", "not white space"],
      ["pässwort-0123456789", "not a character outside printable ASCII"],
      ["viewer-token-0123456789\u200b", "not a character outside printable ASCII"],
      ["viewer=token-0123456789", "not = before its end"],
      ['viewer"token-0123456789', "not punctuation other than - . _ ~ + /"],
      ["viewer,token;0123456789", "not punctuation other than - . _ ~ + /"],
    ];
    for (const [token, holds] of bad) {
      const refusal = (() => {
        try {
          parseTokens(doc(token), "tokens file t.json");
        } catch (error) {
          expect(error).to.be.instanceOf(ConfigError);
          return (error as Error).message;
        }
        throw new Error(`expected ${JSON.stringify(token)} to be refused`);
      })();
      expect(refusal, token).to.equal(
        "tokens file t.json: tokens[1].token: must hold only A-Z a-z 0-9 - . _ ~ + / (then = at the end: " +
          `RFC 6750's bearer token), ${holds}: it is sent as Authorization: Bearer <token>`,
      );
    }
  });

  it("reads a tokens file saved with a UTF-8 byte order mark", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-tokens-"));
    try {
      const file = join(dir, "tokens.json");
      writeFileSync(file, `\uFEFF${JSON.stringify(devTokens(["compute-0"]))}`, { mode: 0o600 });
      expect(readTokensFile(file).tokens).to.have.length(4);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
