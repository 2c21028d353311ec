import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { TEST_WEBHOOK_SECRET } from "../helpers/http.js";
import { signedHeaders } from "../../src/contracts/webhook-signature.js";
import { processCpuS, requireWrk, runWrk } from "./load.js";
import { startBridge } from "../helpers/bridge-process.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { printTable } from "./stats.js";
import { nodeUuid } from "./uuids.js";

/**
 * The inspector bridge end to end: signed webhook deliveries of realistic inspection
 * results, one per node, each with its delivery id (HTTP + signature + rules + ownership
 * + CAS commit + feed append + the answer remembered, on Redis), driven by wrk for a few
 * seconds, beside the raw Redis write rate of the same changes (the node's trait record
 * HSET, one XADD and the delivery's SET per node, pipelined) in the same run; then how
 * fast the shard's holder reads the feed.
 */
/**
 * More nodes than wrk gets through in WEBHOOK_SECONDS, so no delivery is sent twice; at
 * most about 30,000: wrk's LuaJIT silently mangles a request table much larger than that.
 */
const NODES = Number(process.env.BENCH_INSPECTION_NODES ?? 25_000);
const CONCURRENCY = 8;
const WEBHOOK_SECONDS = 4;

export async function inspectorBench(): Promise<void> {
  requireWrk();
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
    const admin = new BridgeClient(bridge.url, bridge.tokenFor("admin"), 60_000);
    const inspector = bridge.tokenFor("inspector");
    for (let from = 0; from < NODES; from += 20_000) {
      const count = Math.min(20_000, NODES - from);
      await admin.bulkUpsert(
        Array.from({ length: count }, (_, i) => ({
          uuid: nodeUuid(from + i + 1),
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
      node: nodeUuid(i + 1),
      sequence: 1,
      data: { ...inspection, pci_devices: inspection.pci_devices.slice(0, 1 + (i % 2)) },
    });
    // Driven by wrk (C), not a Node client on the same two cores: each request a new
    // node's signed inspection, used once, with a delivery id as `shardbridge
    // inspection-watch` sends one (the bridge remembers each delivery's answer). wrk goes
    // round its requests again when it runs out; a second pass would be answered with
    // cheap replays, so it is reported rather than counted (see below).
    const requests = Array.from({ length: NODES }, (_, i) => {
      const body = JSON.stringify(payload(i));
      return {
        method: "POST",
        path: "/v1/inspector/webhook",
        headers: {
          authorization: `Bearer ${inspector}`,
          "content-type": "application/json",
          ...signedHeaders(TEST_WEBHOOK_SECRET, body, Date.now() / 1000, `bench-${nodeUuid(i + 1)}-1`),
        },
        body,
      };
    });
    const cpuBefore = processCpuS(bridge.serve.child.pid);
    const webhook = await runWrk({
      url: bridge.url,
      requests,
      connections: CONCURRENCY,
      threads: 1,
      durationS: WEBHOOK_SECONDS,
    });
    const serverUsPerDelivery = ((processCpuS(bridge.serve.child.pid) - cpuBefore) * 1e6) / webhook.requests;
    if (webhook.requests > NODES)
      process.stderr.write(
        `[inspector bench] wrk sent ${webhook.requests} requests for ${NODES} nodes: the rest were replays ` +
          "of deliveries already applied, and the rate is too high: raise BENCH_INSPECTION_NODES\n",
      );
    if (webhook.non2xx > 0 || webhook.errors > 0)
      process.stderr.write(
        `[inspector bench] ${webhook.non2xx} non-2xx answers, ${webhook.errors} socket errors of ${webhook.requests}\n`,
      );

    // The same number of trait changes written to Redis directly: one record, one stream
    // entry and the delivery's remembered answer each.
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
          JSON.stringify({ node: nodeUuid(j), deltas: ["+CUSTOM_BOOT_UEFI"], generation: 1 }),
        );
        pipeline.set(
          `raw:{nodes}:delivery:bench-${j}`,
          JSON.stringify({
            status: 200,
            body: { node: nodeUuid(j), generation: 1, applied: ["+CUSTOM_BOOT_UEFI"] },
          }),
          "EX",
          86_400,
        );
      }
      await pipeline.exec();
    }
    const rawPerSecond = NODES / ((performance.now() - started) / 1000);
    const delivered = webhook.requests - webhook.non2xx - webhook.errors;
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
      `Inspector bridge: signed inspection deliveries of ${NODES.toLocaleString("en-US")} nodes by wrk, ${CONCURRENCY} connections, ${WEBHOOK_SECONDS} s (${delivered.toLocaleString("en-US")} delivered)`,
      ["what", "per second", "p50 ms", "p99 ms", "server µs each", "ratio", "goal"],
      [
        [
          "raw Redis: record HSET + feed XADD + delivery SET per node, pipelined",
          rawPerSecond,
          "",
          "",
          "",
          "1.00 (baseline)",
          "",
        ],
        [
          "webhook end to end (HTTP, HMAC, rules, ownership, CAS, feed)",
          delivered / webhook.durationS,
          webhook.p50Ms,
          webhook.p99Ms,
          serverUsPerDelivery,
          (delivered / webhook.durationS / rawPerSecond).toFixed(3),
          ">= 0.1x raw",
        ],
        [
          `feed read + ack by the holder (${read.toLocaleString("en-US")} entries, 100 per read)`,
          feedPerSecond,
          "",
          "",
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
