// The pictures in README.md and docs/OPERATIONS.md, taken from the real pages: `make screenshots` (or
// `npx tsx test/tools/screenshots.ts`). The status page: a real bridge with three shards
// of nodes and four real agents, one of them killed -9 so its standby takes over; the
// simulator's page: `simulate --html` of the single-crash scenario. Writes
// docs/img/status-page.png and docs/img/simulate-page.png.
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { reportHtml } from "../../src/tools/sim/html.js";
import { parseScenario } from "../../src/tools/sim/scenario.js";
import { simulate } from "../../src/tools/sim/simulate.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { referenceAgent, startBridge } from "../helpers/bridge-process.js";
import { openBrowser } from "../helpers/browser.js";
import { call, wholeNode } from "../helpers/http.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const out = (name: string) => join(root, "docs", "img", name);

async function statusPage(): Promise<void> {
  const shards = [
    { name: "rack-a", lease_ttl_ms: 6000 },
    { name: "rack-b", lease_ttl_ms: 6000 },
    { name: "rack-c", lease_ttl_ms: 6000 },
  ];
  const ids = ["compute-0", "compute-1", "compute-2", "compute-3"];
  // Agents heartbeat every 10 s and count as down 12 s after their last (nova: 60 s), so
  // the killed one shows as down soon.
  const bridge = await startBridge({ shards, agents: ids, args: ["--service-down-time", "12"] });
  const agents: AgentProcess[] = [];
  const browser = await openBrowser({ width: 1280, height: 720 });
  try {
    const admin = bridge.tokenFor("admin");
    const viewer = bridge.tokenFor("viewer");
    const counts: Array<[string | null, number]> = [
      ["rack-a", 240],
      ["rack-b", 180],
      ["rack-c", 120],
      [null, 35],
    ];
    const nodes = counts.flatMap(([shard, n]) =>
      Array.from({ length: n }, () => wholeNode({ uuid: randomUUID(), shard })),
    );
    const bulk = await call(`${bridge.url}/v1/nodes/bulk`, "POST", { nodes }, admin);
    if (bulk.status !== 200) throw new Error(`bulk: ${JSON.stringify(bulk.body)}`);
    const agent = (id: string, shard: string) => {
      const p = referenceAgent(id, shard, bridge);
      agents.push(p);
      return p;
    };
    const first = agent("compute-0", "rack-a");
    await first.waitFor((e) => e.ev === "active", 20_000);
    await agent("compute-1", "rack-b").waitFor((e) => e.ev === "active", 20_000);
    await agent("compute-2", "rack-c").waitFor((e) => e.ev === "active", 20_000);
    const standby = agent("compute-3", "rack-a");
    await standby.waitFor((e) => e.ev === "standby", 20_000);

    const page = await browser.context.newPage();
    await page.goto(`${bridge.url}/ui/login`);
    await page.fill("#token", viewer);
    await page.click("button[type=submit]");
    await page.waitForSelector('#shards tr[data-key="rack-a"]');
    first.signal("SIGKILL");
    await standby.waitFor((e) => e.ev === "active", 15_000);
    // compute-0 down (12 s silent), the handover in the list, bars settled.
    await page.waitForFunction(
      () => document.querySelector('#agents tr[data-key="compute-0"] td.state')?.textContent === "down",
      undefined,
      { timeout: 30_000 },
    );
    await page.waitForTimeout(1500);
    await page.screenshot({ path: out("status-page.png"), fullPage: true });
    console.log(`wrote ${out("status-page.png")}`);
  } finally {
    await Promise.all(agents.map((a) => a.kill()));
    await browser.close();
    await bridge.stop();
  }
}

async function simulatorPage(): Promise<void> {
  const path = join(root, "examples", "scenarios", "single-crash.json");
  const report = simulate(parseScenario(readFileSync(path, "utf8"), path));
  const dir = mkdtempSync(join(tmpdir(), "sb-shots-"));
  const browser = await openBrowser({ width: 1060, height: 900 });
  try {
    const file = join(dir, "single-crash.html");
    writeFileSync(file, reportHtml(report));
    const page = await browser.context.newPage();
    await page.goto(pathToFileURL(file).href);
    await page.screenshot({ path: out("simulate-page.png"), fullPage: true });
    console.log(`wrote ${out("simulate-page.png")}`);
  } finally {
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await statusPage();
await simulatorPage();
