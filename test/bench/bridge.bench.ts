import { BridgeClient } from "../../src/agent/bridge-client.js";
import { openStore } from "../../src/store/open.js";
import { startBridge } from "../helpers/bridge-process.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { renewLoop } from "./renew-loop.js";
import { closedLoop, printTable } from "./stats.js";
import { nodeUuid } from "./uuids.js";

/**
 * The bridge service on a private redis-server, the bridge in its own process (as it
 * runs), clients in this one:
 * - lease renews over HTTP with keep-alive, several agents at once, beside the store-level
 *   renew rate on the same Redis in the same run;
 * - GET /v1/agents/{id}/nodes for a 1,000-node shard in a 100,000-node registry;
 * - bulk upsert of 100,000 nodes over HTTP: time, and Redis memory per node.
 */
const AGENTS = 8;
const RENEWS = Number(process.env.BENCH_HTTP_RENEWS ?? 20_000);
const NODES = 100_000;
const NODES_PER_SHARD = 1000;
const BULK = 20_000; // the API's most per request

async function usedMemory(redis: TestRedisServer): Promise<number> {
  const admin = redis.client();
  const info = await admin.info("memory");
  admin.disconnect();
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

export async function bridgeBench(): Promise<void> {
  const redis = await TestRedisServer.start();
  const agents = Array.from({ length: AGENTS }, (_, i) => `agent-${i}`);
  const shards = Array.from({ length: AGENTS }, (_, i) => ({ name: `http-${i}`, lease_ttl_ms: 60_000 }));
  const bridge = await startBridge({
    shards,
    agents,
    store: redis.url,
    env: { SHARDBRIDGE_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn" },
  });
  const store = await openStore(redis.url);
  try {
    const admin = new BridgeClient(bridge.url, bridge.tokenFor("admin"), 60_000);
    const rows: Array<Array<string | number>> = [];

    // Bulk load first: it also lets the fresh Redis's recovery wait pass.
    const memoryBefore = await usedMemory(redis);
    const started = performance.now();
    for (let from = 0; from < NODES; from += BULK) {
      const nodes = Array.from({ length: BULK }, (_, i) => ({
        uuid: nodeUuid(from + i + 1),
        shard: `rack-${Math.floor((from + i) / NODES_PER_SHARD)}`,
        name: `node-${from + i}`,
        conductor_group: "",
        instance_host: null,
      }));
      await admin.bulkUpsert(nodes);
    }
    const bulkSeconds = (performance.now() - started) / 1000;
    const bytesPerNode = ((await usedMemory(redis)) - memoryBefore) / NODES;

    // Renews: over HTTP (one client per agent, keep-alive) and at the store, same Redis.
    const clients = agents.map((agent) => new BridgeClient(bridge.url, bridge.tokenOf(agent)));
    await renewLoop((c) => clients[c]!, 2000, AGENTS, "http");
    const http = await renewLoop((c) => clients[c]!, RENEWS, AGENTS, "http");
    await renewLoop(() => store, 5000, AGENTS, "store");
    const direct = await renewLoop(() => store, RENEWS, AGENTS, "store");
    rows.push(
      [
        `Store.renew on redis (${AGENTS} agents)`,
        direct.opsPerSec,
        direct.p50Ms,
        direct.p99Ms,
        "1.00 (baseline)",
      ],
      [
        `HTTP renew via bridge (${AGENTS} agents)`,
        http.opsPerSec,
        http.p50Ms,
        http.p99Ms,
        (http.opsPerSec / direct.opsPerSec).toFixed(2),
      ],
    );

    // The framework's floor on this machine: the same bridge answering /healthz.
    const health = await closedLoop(RENEWS, AGENTS, async () => {
      if (!(await fetch(`${bridge.url}/healthz`)).ok) throw new Error("healthz failed");
    });
    rows.push([
      `GET /healthz on the same bridge (${AGENTS} callers)`,
      health.opsPerSec,
      health.p50Ms,
      health.p99Ms,
      (health.opsPerSec / direct.opsPerSec).toFixed(2),
    ]);

    // An agent's node list: it holds one 1,000-node shard of the 100,000.
    const rackToken = await acquireWhenReady(clients[0]!, "rack-42", "agent-0");
    const list = await closedLoop(300, 1, async () => {
      const mine = await clients[0]!.nodesOf("agent-0", [rackToken]);
      if (mine.nodes.length !== NODES_PER_SHARD) throw new Error(`got ${mine.nodes.length} nodes`);
    });
    rows.push([
      `GET /v1/agents/{id}/nodes (${NODES_PER_SHARD} of ${NODES.toLocaleString("en-US")})`,
      list.opsPerSec,
      list.p50Ms,
      list.p99Ms,
      "",
    ]);
    printTable(
      `Bridge service over HTTP (bridge in its own process, private redis-server; ratio = over the store-level renew rate)`,
      ["what", "ops/s", "p50 ms", "p99 ms", "ratio"],
      rows,
    );
    printTable(
      `Bulk upsert over HTTP: ${NODES.toLocaleString("en-US")} nodes in requests of ${BULK.toLocaleString("en-US")}`,
      ["what", "value"],
      [
        ["wall time, s", bulkSeconds],
        ["nodes per second", NODES / bulkSeconds],
        ["Redis memory per node, bytes", bytesPerNode],
      ],
    );
  } finally {
    await store.close();
    await bridge.stop();
    await redis.stop();
  }
}
