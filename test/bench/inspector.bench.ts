import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { BridgeClient } from "../../src/agent/client.js";
import { postWebhook } from "../helpers/http.js";
import { startBridge } from "../helpers/bridge-process.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { closedLoop, printTable } from "./stats.js";

/**
 * The inspector bridge end to end: signed webhook deliveries of realistic inspection
 * results for 10,000 nodes (HTTP + signature + rules + ownership + CAS commit + feed
 * append on Redis), beside the raw Redis write rate of the same trait changes (one HSET
 * of the node's trait record and one XADD per change, pipelined) in the same run; then
 * how fast the shard's holder reads the feed.
 */
const NODES = Number(process.env.BENCH_INSPECTION_NODES ?? 10_000);
const CONCURRENCY = 8;
const uuid = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

export async function inspectorBench(): Promise<void> {
  const redis = await TestRedisServer.start();
  const bridge = await startBridge({
    // Short: a new store grants a shard only one TTL after its start, and the feed is
    // read at the end under one unrenewed lease, well within it.
    shards: [{ name: "rack", lease_ttl_ms: 10_000 }],
    agents: ["compute-0"],
    store: redis.url,
    env: { SHARDBRIDGE_LOG_LEVEL: "warn" },
    args: [
      ...["--trait-rules", fileURLToPath(new URL("../../examples/trait-rules.json", import.meta.url))],
      ...["--ownership", fileURLToPath(new URL("../../examples/ownership.json", import.meta.url))],
    ],
  });
  try {
    const inspection = JSON.parse(
      readFileSync(new URL("../../examples/inspection-result.json", import.meta.url), "utf8"),
    );
    const admin = new BridgeClient(
      bridge.url,
      bridge.tokens.tokens.find((t) => t.role === "admin")!.token,
      60_000,
    );
    const inspector = bridge.tokens.tokens.find((t) => t.role === "inspector")!.token;
    for (let from = 0; from < NODES; from += 20_000) {
      const count = Math.min(20_000, NODES - from);
      await admin.bulkUpsert(
        Array.from({ length: count }, (_, i) => ({
          uuid: uuid(from + i + 1),
          name: null,
          shard: "rack",
          conductor_group: "",
          instance_host: null,
        })),
      );
    }
    // Each node's inspection: its own vendor mix, so deltas differ between nodes.
    const payload = (i: number) => ({
      kind: "inspection",
      node: uuid(i + 1),
      sequence: 1,
      data: { ...inspection, pci_devices: inspection.pci_devices.slice(0, 1 + (i % 2)) },
    });
    let changes = 0;
    const webhook = await closedLoop(NODES, CONCURRENCY, async (i) => {
      const res = await postWebhook(bridge.url, payload(i), { token: inspector });
      if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${JSON.stringify(res.body)}`);
      changes += res.body.applied.length;
    });

    // The same number of trait changes written to Redis directly, one record + one stream entry each.
    const client = redis.client();
    const record = JSON.stringify({
      holders: { CUSTOM_BOOT_UEFI: "inspector" },
      generation: 1,
      lastOrder: { inspector: 1 },
    });
    const started = performance.now();
    for (let i = 0; i < NODES; i += 500) {
      const pipeline = client.pipeline();
      for (let j = i; j < Math.min(NODES, i + 500); j++) {
        pipeline.hset(`raw:{nodes}:traits:${j}`, "generation", "1", "record", record);
        pipeline.xadd(
          "raw:{nodes}:feed",
          "*",
          "e",
          JSON.stringify({ node: uuid(j), deltas: ["+CUSTOM_BOOT_UEFI"], generation: 1 }),
        );
      }
      await pipeline.exec();
    }
    const rawPerSecond = NODES / ((performance.now() - started) / 1000);
    client.disconnect();

    // The holder drains the feed it was given.
    const agent = new BridgeClient(bridge.url, bridge.tokenOf("compute-0"), 60_000);
    const token = await acquireWhenReady(agent, "rack", "compute-0");
    const feedStarted = performance.now();
    let read = 0;
    for (;;) {
      const { entries } = await agent.readFeed("rack", token);
      if (entries.length === 0) break;
      read += entries.length;
      await agent.ackFeed("rack", token, entries[entries.length - 1]!.id);
    }
    const feedPerSecond = read / ((performance.now() - feedStarted) / 1000);

    printTable(
      `Inspector bridge: ${NODES.toLocaleString("en-US")} signed inspection deliveries (${changes.toLocaleString("en-US")} trait changes), ${CONCURRENCY} at a time`,
      ["what", "per second", "p50 ms", "p99 ms", "ratio"],
      [
        ["raw Redis: record HSET + feed XADD per node, pipelined", rawPerSecond, "", "", "1.00 (baseline)"],
        [
          "webhook end to end (HTTP, HMAC, rules, ownership, CAS, feed)",
          webhook.opsPerSec,
          webhook.p50Ms,
          webhook.p99Ms,
          (webhook.opsPerSec / rawPerSecond).toFixed(3),
        ],
        [
          `feed read + ack by the holder (${read.toLocaleString("en-US")} entries, 100 per read)`,
          feedPerSecond,
          "",
          "",
          "",
        ],
      ],
    );
  } finally {
    await bridge.stop();
    await redis.stop();
  }
}
