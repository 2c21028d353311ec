import { BridgeClient } from "../../src/agent/bridge-client.js";
import { startBridge } from "../helpers/bridge-process.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { createIronicNode, ironicPeersAvailable, startIronic } from "../helpers/ironic-peer.js";
import { requireWrk, runWrk, type WrkRequest, type WrkResult } from "./load.js";
import { printTable } from "./stats.js";

const SHARD = "rack-bench";
const IRONIC = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };
const SECONDS = 5;
const CONNECTIONS = 4;
const TTL_MS = 3000;

/**
 * What the fenced Ironic endpoint costs: the same Ironic requests from wrk, straight to
 * the real Ironic and through `/fenced/{shard}/lease-{token}/ironic`, in the same run. A
 * read is one proxy hop; a write adds the lease check and Ironic's own read of the node's
 * shard. Ironic (one Python process, sqlite) is the slow part either way.
 */
export async function fencedBench(): Promise<void> {
  if (!ironicPeersAvailable()) {
    process.stdout.write("fenced endpoint bench: ../shared/peers not found, skipped\n");
    return;
  }
  requireWrk();
  const ironic = await startIronic();
  const bridge = await startBridge({
    // A short TTL: a new store grants a shard only one TTL after its start. Renewed below.
    shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
    agents: ["host-a"],
    args: ["--ironic", ironic.endpoint],
    env: { SHARDBRIDGE_LOG_LEVEL: "warn" },
  });
  let renewing: NodeJS.Timeout | undefined;
  try {
    const node = await createIronicNode(ironic.endpoint, { name: "bench-node", shard: SHARD });
    const agent = new BridgeClient(bridge.url, bridge.tokenOf("host-a"));
    const token = await acquireWhenReady(agent, SHARD, "host-a");
    renewing = setInterval(
      () =>
        void fetch(`${bridge.url}/v1/shards/${SHARD}/lease`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${bridge.tokenOf("host-a")}`,
            "content-type": "application/json",
          },
          body: JSON.stringify({ agent: "host-a", token }),
        }).catch(() => undefined),
      TTL_MS / 4,
    );
    const prefix = `/fenced/${SHARD}/lease-${token}/ironic`;
    const read: WrkRequest = { method: "GET", path: `/v1/nodes/${node}`, headers: IRONIC };
    const write: WrkRequest = {
      method: "PATCH",
      path: `/v1/nodes/${node}`,
      headers: IRONIC,
      body: JSON.stringify([{ op: "add", path: "/extra/bench", value: "x" }]),
    };
    const run = (url: string, request: WrkRequest) =>
      runWrk({ url, requests: [request], connections: CONNECTIONS, threads: 1, durationS: SECONDS });
    const results: Array<[string, WrkResult, WrkResult]> = [];
    for (const [what, request] of [
      ["GET /v1/nodes/{uuid}", read],
      ["PATCH /v1/nodes/{uuid}", write],
    ] as const) {
      const direct = await run(ironic.endpoint, request);
      const fenced = await run(bridge.url, { ...request, path: `${prefix}${request.path}` });
      results.push([what, direct, fenced]);
    }
    printTable(
      `Fenced Ironic endpoint vs Ironic direct (real Ironic, wrk ${CONNECTIONS} conns, ${SECONDS} s a run)`,
      ["request", "direct ops/s", "p50 ms", "p99 ms", "fenced ops/s", "p50 ms", "p99 ms", "ratio", "errors"],
      results.map(([what, direct, fenced]) => [
        what,
        direct.rps,
        direct.p50Ms,
        direct.p99Ms,
        fenced.rps,
        fenced.p50Ms,
        fenced.p99Ms,
        `${(fenced.rps / direct.rps).toFixed(2)}x`,
        `${direct.errors + direct.non2xx} / ${fenced.errors + fenced.non2xx}`,
      ]),
    );
  } finally {
    clearInterval(renewing);
    await bridge.stop();
    ironic.stop();
  }
}
