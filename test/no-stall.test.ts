import { expect } from "chai";
import { BridgeClient } from "../src/agent/client.js";
import { acquireWhenReady } from "./helpers/leases.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { signedHeaders } from "../src/inspection/signature.js";
import { AgentProcess } from "./helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { TEST_WEBHOOK_SECRET } from "./helpers/http.js";
import { TestRedisServer } from "./helpers/redis-server.js";

const LOAD = fileURLToPath(new URL("./fixtures/http-load.ts", import.meta.url));
const EXAMPLES = fileURLToPath(new URL("../examples/", import.meta.url));
const NODES = 100_000;
const BULK = 20_000;
const TTL_MS = 3000;
const uuid = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

/**
 * The bridge is one event loop, and every renew of every shard waits behind it: no
 * request at the sizes the API accepts may hold it. Heavy requests at their limits run
 * for a few seconds — a legacy-pool agent's share of 98,000 unsharded nodes, a bulk of
 * 20,000 nodes, 10,000 nodes in one page, 100,000 nodes counted by GET /v1/shards, a
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
      shards: [
        { name: "fleet-a", lease_ttl_ms: TTL_MS },
        { name: "probe", lease_ttl_ms: TTL_MS },
      ],
      agents: ["fleet-0", "probe-0", "legacy-0", "legacy-1"],
      store: redis.url,
      args: ["--trait-rules", join(EXAMPLES, "trait-rules.json"), "--ring-rebuild", "0"],
      env: { SHARDBRIDGE_LOG_LEVEL: "error" },
    });
  });
  after(async () => {
    await bridge?.stop();
    await redis?.stop();
  });

  const token = (role: "admin" | "inspector") => bridge.tokens.tokens.find((t) => t.role === role)!.token;
  const as = (bearer: string, extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${bearer}`,
    "content-type": "application/json",
    ...extra,
  });
  const post = async (path: string, body: unknown, bearer: string) => {
    const res = await fetch(`${bridge.url}${path}`, {
      method: "POST",
      headers: as(bearer),
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const acquire = (shard: string, agent: string) =>
    acquireWhenReady(new BridgeClient(bridge.url, bridge.tokenOf(agent)), shard, agent);
  const lagMaxS = async () => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    return Number(/^shardbridge_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1]);
  };

  it("renews stay fast and the event loop never stalls while the heaviest requests run", async () => {
    const nodes = Array.from({ length: NODES }, (_, i) => ({
      uuid: uuid(i + 1),
      name: `node-${i}`,
      shard: i % 100 === 0 ? "fleet-a" : null,
      conductor_group: "",
      instance_host: null,
    }));
    for (let i = 0; i < NODES; i += BULK)
      expect(
        (await post("/v1/nodes/bulk", { nodes: nodes.slice(i, i + BULK) }, token("admin"))).status,
      ).to.equal(200);
    for (const agent of ["legacy-0", "legacy-1"])
      await post(`/v1/agents/${agent}/heartbeat`, { shards: [] }, bridge.tokenOf(agent));
    await post("/v1/agents/fleet-0/heartbeat", { shards: ["fleet-a"] }, bridge.tokenOf("fleet-0"));
    // A feed of 1,000 entries for the fleet shard's holder to read.
    const sharded = nodes.filter((n) => n.shard !== null);
    for (let i = 0; i < 1000; i += 50)
      await Promise.all(
        Array.from({ length: 50 }, (_, j) => {
          const body = JSON.stringify({
            kind: "deltas",
            node: sharded[(i + j) % sharded.length]!.uuid,
            deltas: [`+CUSTOM_T${i + j}`],
          });
          return fetch(`${bridge.url}/v1/inspector/webhook`, {
            method: "POST",
            headers: as(token("inspector"), signedHeaders(TEST_WEBHOOK_SECRET, body, Date.now() / 1000)),
            body,
          });
        }),
      );
    // An inspection result near the 1 MiB limit: 17,000 PCI devices of a few vendors
    // (applied once, then stale: its sequence does not grow).
    const inspection = JSON.stringify({
      kind: "inspection",
      node: sharded[0]!.uuid,
      sequence: 1,
      data: {
        inventory: { cpu: { flags: [] }, interfaces: [] },
        pci_devices: Array.from({ length: 17_000 }, (_, i) => ({
          vendor_id: (0x8000 + (i % 8)).toString(16),
          product_id: "1017",
          class: "020000",
        })),
      },
    });
    expect(inspection.length).to.be.within(900_000, 1024 * 1024);
    // The leases last only TTL_MS unrenewed: take them last, and keep both renewed.
    const fleetToken = await acquire("fleet-a", "fleet-0");
    const probeToken = await acquire("probe", "probe-0");
    const heavy = [
      { method: "GET", path: "/v1/agents/legacy-0/nodes", headers: as(token("admin")) },
      {
        method: "GET",
        path: `/v1/agents/fleet-0/nodes?token=${fleetToken}`,
        headers: as(bridge.tokenOf("fleet-0")),
      },
      {
        method: "POST",
        path: "/v1/nodes/bulk",
        headers: as(token("admin")),
        body: JSON.stringify({ nodes: nodes.slice(0, BULK) }),
      },
      { method: "GET", path: "/v1/nodes?limit=10000", headers: as(token("admin")) },
      { method: "GET", path: "/v1/shards", headers: as(token("admin")) },
      {
        method: "GET",
        path: `/v1/shards/fleet-a/feed?token=${fleetToken}&limit=1000`,
        headers: as(bridge.tokenOf("fleet-0")),
      },
      {
        method: "POST",
        path: "/v1/inspector/webhook",
        headers: as(token("inspector"), signedHeaders(TEST_WEBHOOK_SECRET, inspection, Date.now() / 1000)),
        body: inspection,
      },
    ];
    const renew = (shard: string, agent: string, leaseToken: number) => [
      {
        method: "POST",
        path: `/v1/shards/${shard}/lease`,
        headers: as(bridge.tokenOf(agent)),
        body: JSON.stringify({ agent, token: leaseToken }),
      },
    ];
    writeFileSync(join(bridge.dir, "heavy.json"), JSON.stringify(heavy));
    writeFileSync(join(bridge.dir, "renew.json"), JSON.stringify(renew("probe", "probe-0", probeToken)));
    writeFileSync(join(bridge.dir, "fleet.json"), JSON.stringify(renew("fleet-a", "fleet-0", fleetToken)));

    await lagMaxS(); // a scrape resets the bridge's event-loop delay histogram
    // Each load in its own process: `mode` heavy or probe, its requests from `file`.
    const run = (name: string, mode: string, file: string, durationMs: number, every?: number) =>
      AgentProcess.spawnCommand(name, process.execPath, [
        ...["--import", "tsx", LOAD, "--url", bridge.url, "--mode", mode],
        ...["--requests", join(bridge.dir, file), "--duration", String(durationMs)],
        ...(every === undefined ? [] : ["--every", String(every)]),
      ]);
    const load = run("heavy", "heavy", "heavy.json", 6000);
    const probe = run("probe", "probe", "renew.json", 6000);
    const keeper = run("keeper", "probe", "fleet.json", 6500, 200);
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
    // Every heavy route was really served, each at its size, and every renew succeeded.
    for (const route of [
      "GET /v1/agents/legacy-0/nodes 200",
      "POST /v1/nodes/bulk 200",
      "GET /v1/nodes 200",
      "GET /v1/shards 200",
      "GET /v1/shards/fleet-a/feed 200",
      "POST /v1/inspector/webhook 409",
    ])
      expect(statuses[route] ?? 0, route).to.be.greaterThan(0);
    expect(probed.failed, "renews refused or failed").to.equal(0);
    expect(probed.max as number, "worst renew beside the heavy requests, ms").to.be.below(750);
    expect(lag, "the bridge's own worst event-loop delay, s").to.be.below(0.25);
  });
});
