import { expect } from "chai";
import type { Page } from "playwright-core";
import { AgentProcess } from "../helpers/agent-process.js";
import { referenceAgent, startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { openBrowser } from "../helpers/browser.js";
import { call } from "../helpers/http.js";
import { TestRedisServer } from "../helpers/redis-server.js";

const TTL_MS = 2000;
const NODE = "44444444-4444-4444-8444-444444444444";

/** POST the login form as a browser would; answers the status, the cookie set and the body. */
async function logIn(url: string, token: string) {
  const res = await fetch(`${url}/ui/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token }).toString(),
    redirect: "manual",
  });
  return { status: res.status, setCookie: res.headers.get("set-cookie"), body: await res.text() };
}

const holderOf = (page: Page, shard: string) =>
  page.locator(`#shards tbody tr[data-key="${shard}"] td.holder`).textContent();

/**
 * The status page end to end: two real `shardbridge serve` on one redis-server with one
 * tokens file, two real `shardbridge agent`s on a shard with a 2 s TTL talking to bridge
 * B only, and Debian's chromium showing bridge A's page. What bridge A's page shows of a
 * failover it took no part in is what a page behind a load balancer shows.
 */
describe("The status page, in a real browser", function () {
  this.timeout(90_000);
  let redis: TestRedisServer;
  let bridgeA: BridgeProcess;
  let bridgeB: BridgeProcess;
  const agents: AgentProcess[] = [];
  let browser: Awaited<ReturnType<typeof openBrowser>>;
  let page: Page;
  const viewer = () => bridgeA.tokenFor("viewer");
  const admin = () => bridgeA.tokenFor("admin");

  before(async () => {
    redis = await TestRedisServer.start();
    const shards = [
      { name: "rack", lease_ttl_ms: TTL_MS },
      { name: "spare", lease_ttl_ms: 6000 },
    ];
    bridgeA = await startBridge({ shards, agents: ["compute-0", "compute-1"], store: redis.url });
    bridgeB = await startBridge({ shards, agents: [], store: redis.url, tokens: bridgeA.tokens });
    for (const id of ["compute-0", "compute-1"]) {
      const agent = referenceAgent(id, "rack", bridgeB);
      agents.push(agent);
      // compute-0 first, so it is the one active
      if (id === "compute-0") await agent.waitFor((e) => e.ev === "active", 15_000);
    }
    await agents[1]!.waitFor((e) => e.ev === "standby", 10_000);
    browser = await openBrowser();
    page = await browser.context.newPage();
  });
  after(async () => {
    await Promise.all(agents.map((a) => a.kill()));
    await browser?.close();
    await bridgeA?.stop();
    await bridgeB?.stop();
    await redis?.stop();
  });

  it("gives a visitor without a session the login form, no data, and 401 on the page's events", async () => {
    const answer = await page.goto(`${bridgeA.url}/ui`);
    expect(page.url()).to.equal(`${bridgeA.url}/ui/login`);
    expect(answer!.status()).to.equal(200);
    const text = await page.locator("body").innerText();
    expect(text).to.include("Viewer or admin token");
    expect(text).not.to.include("rack").and.not.to.include("compute-0");
    const events = await fetch(`${bridgeA.url}/ui/events`);
    expect(events.status).to.equal(401);
    expect(events.headers.get("content-type")).to.match(/^application\/json/);
    // The page's script gets no data without a session either.
    const script = await page.evaluate(async () => (await fetch("/ui/events")).status);
    expect(script).to.equal(401);
  });

  it("refuses a login with an unknown token (401) or an agent's (403), and sets no cookie", async () => {
    const unknown = await logIn(bridgeA.url, "not-a-token-of-this-bridge");
    expect(unknown.status).to.equal(401);
    expect(unknown.body).to.include("not known to this bridge");
    expect(unknown.setCookie).to.equal(null);
    const agent = await logIn(bridgeA.url, bridgeA.tokenOf("compute-0"));
    expect(agent.status).to.equal(403);
    expect(agent.body).to.include("viewer and admin tokens");
    expect(agent.setCookie).to.equal(null);
  });

  it("lists the shards and their holders once a viewer logs in, under a strict Content-Security-Policy", async () => {
    await page.goto(`${bridgeA.url}/ui/login`);
    await page.fill("#token", viewer());
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${bridgeA.url}/ui` && r.status() === 200),
      page.click("button[type=submit]"),
    ]);
    await page.waitForFunction(
      () => document.querySelector('#shards tr[data-key="rack"] td.holder')?.textContent === "compute-0",
      undefined,
      { timeout: 5000 },
    );
    expect(await holderOf(page, "spare")).to.equal("-");
    expect(await page.locator('#shards tr[data-key="spare"] td.left').innerText()).to.include("free");
    expect(await page.locator('#shards tr[data-key="rack"] td.left').innerText()).to.match(/\d\.\d s of 2 s/);
    const agentsShown = await page
      .locator("#agents tbody tr")
      .evaluateAll((rows) =>
        rows.map((r) => [...(r as HTMLTableRowElement).cells].map((c) => c.textContent)),
      );
    expect(agentsShown.map((r) => r.slice(0, 3))).to.deep.include.members([
      ["compute-0", "up", "rack"],
      ["compute-1", "up", "-"],
    ]);
    expect(await page.locator("#connection").textContent()).to.equal("live");
    // No fencing token on the page, whoever looks.
    const token = (await call(`${bridgeA.url}/v1/shards/rack/lease`, "GET", undefined, admin())).body.lease
      .token;
    expect(await page.content()).not.to.include(String(token));

    const csp = answer.headers()["content-security-policy"]!;
    expect(csp)
      .to.include("default-src 'none'")
      .and.include("script-src 'self'")
      .and.include("style-src 'self'");
    const css = await fetch(`${bridgeA.url}/ui/static/page.css`);
    expect(css.headers.get("content-type")).to.equal("text/css; charset=utf-8");
    expect(await css.text()).to.include(".bar");
    // Every script is a file; no inline script or style attribute in what the bridge sent.
    const served = await answer.text();
    expect(served.match(/<script\b[^>]*>/g)).to.deep.equal([
      '<script type="module" src="/ui/static/status.js">',
    ]);
    expect(served).not.to.match(/\sstyle=|\son[a-z]+=/i);
    // And the policy holds in the browser: a script put into the page does not run.
    const ran = await page.evaluate(async () => {
      const s = document.createElement("script");
      s.textContent = "window.__injected = true";
      document.body.append(s);
      await new Promise((r) => setTimeout(r, 100));
      return (window as unknown as { __injected?: boolean }).__injected === true;
    });
    expect(ran).to.equal(false);
    const [cookie] = await browser.context.cookies(bridgeA.url + "/ui");
    expect(cookie).to.include({ name: "shardbridge_page", httpOnly: true, sameSite: "Strict", path: "/ui" });
    expect(cookie!.value).not.to.include(viewer());
  });

  it("shows the new holder within TTL + 2 s of a kill -9 of the active agent, without a reload", async () => {
    await page.evaluate(() => ((window as unknown as { __samePage: boolean }).__samePage = true));
    const [first, second] = agents;
    const killedAt = performance.now();
    first!.signal("SIGKILL");
    await page.waitForFunction(
      () => document.querySelector('#shards tr[data-key="rack"] td.holder')?.textContent === "compute-1",
      undefined,
      { timeout: TTL_MS + 2000, polling: 50 },
    );
    const shownMs = performance.now() - killedAt;
    // The agent's own record: when it became active.
    const active = await second!.waitFor((e) => e.ev === "active", 1000);
    console.log(
      `      page shows the new holder ${Math.round(shownMs)} ms after kill -9 ` +
        `(agent active after ${Math.round(active.seenAt - killedAt)} ms, ttl ${TTL_MS} ms)`,
    );
    expect(shownMs).to.be.below(TTL_MS + 2000);
    expect(await page.evaluate(() => (window as unknown as { __samePage?: boolean }).__samePage)).to.equal(
      true,
    );
    const transitions = await page.locator("#transitions li span").allTextContents();
    // The page looks at the store every 500 ms: a look between the lease's expiry and the
    // standby's grant shows the two steps (docs/API.md, status page), else one handover.
    if (transitions[0] === "rack: granted to compute-1")
      expect(transitions[1]).to.equal("rack: compute-0's lease expired; nobody holds it");
    else {
      expect(transitions[0]).to.match(
        /^rack: handed over from compute-0 to compute-1 \(compute-0's lease had expired\)$/,
      );
      expect(await page.locator("#transitions li").first().getAttribute("data-kind")).to.equal("handed over");
    }
  });

  it("lets the viewer read but not write: 403 and nothing written; the page's cookie opens no API route", async () => {
    const before = (await call(`${bridgeA.url}/v1/shards/rack/lease`, "GET", undefined, admin())).body.lease;
    expect(before.holder).to.equal("compute-1");
    const reads = await call(`${bridgeA.url}/v1/shards`, "GET", undefined, viewer());
    expect(reads.status).to.equal(200);
    expect(reads.body.shards.find((s: { name: string }) => s.name === "rack").lease.token).to.equal(null);
    const writes: Array<[string, string, unknown]> = [
      ["POST", "/v1/shards/spare/lease", { agent: "compute-0" }],
      ["POST", "/v1/shards/rack/lease", { agent: "compute-1", token: before.token }],
      ["DELETE", "/v1/shards/rack/lease", { agent: "compute-1", token: before.token }],
      ["POST", "/v1/agents/compute-9/heartbeat", { shards: ["spare"] }],
      ["PUT", `/v1/nodes/${NODE}`, { name: null, shard: "spare", conductor_group: "", instance_host: null }],
      ["POST", "/v1/nodes/bulk", { nodes: [] }],
      ["POST", "/v1/shards/rack/feed/ack", { id: "0-1" }],
    ];
    for (const [method, path, body] of writes) {
      const answer = await call(`${bridgeA.url}${path}`, method, body, viewer());
      expect(answer.status, `${method} ${path}`).to.equal(403);
      expect(answer.body.errors[0].code).to.equal("shardbridge.auth.forbidden");
    }
    const after = (await call(`${bridgeA.url}/v1/shards/rack/lease`, "GET", undefined, admin())).body;
    expect(after.lease).to.include({ holder: "compute-1", token: before.token });
    expect(
      (await call(`${bridgeA.url}/v1/shards/spare/lease`, "GET", undefined, admin())).body.lease,
    ).to.equal(null);
    expect((await call(`${bridgeA.url}/v1/nodes/${NODE}`, "GET", undefined, admin())).status).to.equal(404);
    const seen = (await call(`${bridgeA.url}/v1/agents`, "GET", undefined, admin())).body.agents;
    expect(seen.map((a: { id: string }) => a.id)).not.to.include("compute-9");

    // The session cookie is for the page: the API answers it as no credentials at all.
    const { setCookie } = await logIn(bridgeA.url, viewer());
    const session = setCookie!.split(";")[0]!;
    for (const [method, path] of [
      ["GET", "/v1/shards"],
      ["POST", "/v1/shards/spare/lease"],
    ]) {
      const res = await fetch(`${bridgeA.url}${path}`, {
        method,
        headers: { cookie: session, "content-type": "application/json" },
        ...(method === "POST" && { body: JSON.stringify({ agent: "compute-0" }) }),
      });
      expect(res.status, `${method} ${path} with the page's cookie`).to.equal(401);
    }
    // Bridge B, with the same tokens file, takes bridge A's session: a page behind a load balancer.
    const elsewhere = await fetch(`${bridgeB.url}/ui/events`, { headers: { cookie: session } });
    expect(elsewhere.status).to.equal(200);
    expect(elsewhere.headers.get("content-type")).to.match(/^text\/event-stream/);
    await elsewhere.body!.cancel();
  });

  it("logs out: back to the login form, and the page's events are refused", async () => {
    await page.goto(`${bridgeA.url}/ui`);
    await page.click("header button[type=submit]");
    await page.waitForURL(`${bridgeA.url}/ui/login`);
    expect(await browser.context.cookies(bridgeA.url + "/ui")).to.deep.equal([]);
    expect(await page.evaluate(async () => (await fetch("/ui/events")).status)).to.equal(401);
  });
});

/**
 * A wall screen: 1280x900, no one to scroll inside a panel, agent ids as long as hostnames
 * get (40 characters). Every column of the shards and agents panels must be on screen and
 * every cell's text whole, read back from the page.
 */
describe("The status page on a wall screen (1280x900) with hostname-long agent ids", function () {
  this.timeout(90_000);
  const ids = [0, 1, 2, 3].map((i) => `compute-${i}.rack-a17.dc-1.east.example.com`);
  const shards = [0, 1].map((i) => ({ name: `rack-a17-row-${i}-east`, lease_ttl_ms: 3000 }));
  let bridge: BridgeProcess;
  const agents: AgentProcess[] = [];
  let browser: Awaited<ReturnType<typeof openBrowser>>;

  before(async () => {
    bridge = await startBridge({ shards, agents: [] });
    // Two per shard, acting under the admin's token (any id): the first of each is active.
    for (const [i, id] of ids.entries()) {
      const agent = AgentProcess.cli(id, [
        ...["agent", `--id=${id}`, `--shard=${shards[i % 2]!.name}`],
        ...["--bridge", bridge.url, "--token", bridge.tokenFor("admin")],
      ]);
      agents.push(agent);
      if (i < 2) await agent.waitFor((e) => e.ev === "active", 15_000);
    }
    await Promise.all(agents.slice(2).map((a) => a.waitFor((e) => e.ev === "standby", 10_000)));
    browser = await openBrowser({ width: 1280, height: 900 });
  });
  after(async () => {
    await Promise.all(agents.map((a) => a.kill()));
    await browser?.close();
    await bridge?.stop();
  });

  it("shows every column of the shards and agents panels, every cell whole, without scrolling", async () => {
    expect(ids.every((id) => id.length === 40)).to.equal(true);
    const page = await browser.context.newPage();
    await page.goto(`${bridge.url}/ui/login`);
    await page.fill("#token", bridge.tokenFor("viewer"));
    await page.click("button[type=submit]");
    await page.waitForFunction(
      (count) => document.querySelectorAll("#agents tbody tr").length === count,
      ids.length,
      { timeout: 10_000 },
    );
    // No named function inside: tsx's helpers for names do not exist in the page.
    const panels = await page.evaluate(() =>
      ["shards", "agents"].map((table) => {
        const section = document.getElementById(table)!.closest("section")!;
        const edge = section.getBoundingClientRect().right;
        const rows = [...(document.getElementById(table) as HTMLTableElement).rows].map((row) =>
          [...row.cells].map((c) => ({
            text: c.innerText,
            whole: c.scrollWidth <= c.clientWidth,
            onScreen: c.getBoundingClientRect().right <= edge + 0.5,
          })),
        );
        return { table, scrolls: section.scrollWidth > section.clientWidth, rows };
      }),
    );
    for (const { table, scrolls, rows } of panels) {
      expect(scrolls, `${table}: the panel scrolls sideways`).to.equal(false);
      for (const cells of rows)
        for (const cell of cells) {
          expect(cell.onScreen, `${table}: ${JSON.stringify(cell.text)} past the panel's edge`).to.equal(
            true,
          );
          expect(cell.whole, `${table}: ${JSON.stringify(cell.text)} cut`).to.equal(true);
        }
    }
    const [shardPanel, agentPanel] = panels;
    const words = (cells: Array<{ text: string }>) => cells.map((c) => c.text.replace(/\s+/g, ""));
    expect(words(shardPanel!.rows[0]!)).to.deep.equal([
      "Shard",
      "Nodes",
      "Holder",
      "Timeleft",
      "Since",
      "Feedlag",
    ]);
    expect(shardPanel!.rows.slice(1).map((r) => words(r)[2])).to.have.members(ids.slice(0, 2));
    expect(words(agentPanel!.rows[0]!)).to.deep.equal(["Agent", "State", "Holds", "Serves", "Lastseen"]);
    expect(agentPanel!.rows.slice(1).map((r) => words(r)[0])).to.have.members(ids);
    for (const row of agentPanel!.rows.slice(1)) expect(words(row)[4], "last seen").to.match(/\d/);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).to.be.at.most(1280);
  });
});
