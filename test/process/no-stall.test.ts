import { expect } from "chai";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { HEAVY_AGENTS, HEAVY_SHARDS, loadHeavyFleet, writeRequests } from "../helpers/heavy-fleet.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { uuid } from "../helpers/http.js";

const LOAD = fileURLToPath(new URL("../fixtures/http-load.ts", import.meta.url));
const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url));
/**
 * Long enough that the load processes (node + tsx, a second or more to start on a busy
 * machine) renew the leases taken before them in time; the store's first TTL, when no
 * lease is granted, runs down while the fleet loads.
 */
const TTL_MS = 10_000;

/**
 * The bridge is one event loop, and every renew of every shard waits behind it: no
 * request at the sizes the API accepts may hold it. Heavy requests at their limits run
 * for a few seconds — a legacy-pool agent's share of 98,000 unsharded nodes, a bulk of
 * 20,000 nodes (and one refused, every node at fault), a heartbeat of 500 KiB that names
 * no shard, 10,000 nodes in one page, 100,000 nodes counted by GET /v1/shards, a
 * feed read of 1,000 entries, an inspection result near its 1 MiB limit — while a probe
 * renews a lease every 20 ms. The goal is a few milliseconds; the bounds here are far
 * above it so that a busy machine does not fail the test, and far below what a stall
 * costs (a node list that walks every unsharded node held the loop for 1–3 s).
 */
describe("No request stalls the bridge (real bridge and redis-server, heavy routes at their limits)", function () {
  this.timeout(120_000);
  let redis: TestRedisServer;
  let bridge: BridgeProcess;

  before(async () => {
    redis = await TestRedisServer.start();
    bridge = await startBridge({
      shards: HEAVY_SHARDS.map((name) => ({ name, lease_ttl_ms: TTL_MS })),
      agents: HEAVY_AGENTS,
      store: redis.url,
      args: ["--trait-rules", join(EXAMPLES, "trait-rules.json"), "--ring-rebuild", "0"],
      env: { SHARDBRIDGE_LOG_LEVEL: "error" },
    });
  });
  after(async () => {
    await bridge?.stop();
    await redis?.stop();
  });

  const lagMaxS = async () => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    return Number(/^shardbridge_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1]);
  };

  it("renews stay fast and the event loop never stalls while the heaviest requests run", async () => {
    const fleet = await loadHeavyFleet(bridge, uuid);
    writeRequests(
      bridge.dir,
      "heavy.json",
      fleet.heavy.map((h) => h.request),
    );
    writeRequests(bridge.dir, "renew.json", [fleet.renewProbe]);
    writeRequests(bridge.dir, "fleet.json", [fleet.renewFleet]);

    await lagMaxS(); // a scrape resets the bridge's event-loop delay histogram
    // Each load in its own process: `mode` heavy or probe, its requests from `file`.
    const run = (name: string, mode: string, file: string, durationMs: number, every?: number) =>
      AgentProcess.spawnCommand(name, process.execPath, [
        ...["--import", "tsx", LOAD, "--url", bridge.url, "--mode", mode],
        ...["--requests", join(bridge.dir, file), "--duration", String(durationMs)],
        ...(every === undefined ? [] : ["--every", String(every)]),
      ]);
    const load = run("heavy", "heavy", "heavy.json", 4000);
    const probe = run("probe", "probe", "renew.json", 4000);
    const keeper = run("keeper", "probe", "fleet.json", 4500, 200);
    const [loaded, probed, kept] = await Promise.all([
      load.waitFor((e) => e.ev === "heavy", 60_000),
      probe.waitFor((e) => e.ev === "probe", 60_000),
      keeper.waitFor((e) => e.ev === "probe", 60_000),
    ]);
    expect(kept.failed, "the fleet shard's renews").to.equal(0);
    const lag = await lagMaxS();
    const statuses = loaded.statuses as Record<string, number>;
    console.log(`      heavy requests: ${JSON.stringify(statuses)}`);
    console.log(
      `      renew beside them: p50 ${Number(probed.p50).toFixed(1)} ms, p99 ${Number(probed.p99).toFixed(1)} ms, ` +
        `max ${Number(probed.max).toFixed(1)} ms over ${probed.count}; bridge event-loop delay max ${(lag * 1000).toFixed(1)} ms`,
    );
    // Every heavy route was really served, each at its size, and every renew succeeded. (The
    // refused bulk and heartbeat are here to be exercised beside the rest; their contents are
    // checked in api-refusals.test.ts, and what they cost the loop in the stall bench.)
    for (const route of [
      "GET /v1/agents/legacy-0/nodes 200",
      "POST /v1/nodes/bulk 200",
      "POST /v1/nodes/bulk 400",
      "POST /v1/agents/legacy-1/heartbeat 400",
      "GET /v1/nodes 200",
      "GET /v1/shards 200",
      "GET /v1/shards/fleet-a/feed 200",
    ])
      expect(statuses[route] ?? 0, route).to.be.greaterThan(0);
    // The inspection is applied the first time (200) and stale every time after (409).
    const inspections =
      (statuses["POST /v1/inspector/webhook 200"] ?? 0) + (statuses["POST /v1/inspector/webhook 409"] ?? 0);
    expect(inspections, "inspection results answered").to.be.greaterThan(0);
    expect(probed.failed, "renews refused or failed").to.equal(0);
    expect(probed.max, "worst renew beside the heavy requests, ms").to.be.below(750);
    expect(lag, "the bridge's own worst event-loop delay, s").to.be.below(0.25);
  });
});
