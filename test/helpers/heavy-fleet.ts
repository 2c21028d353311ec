import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { signedHeaders } from "../../src/contracts/webhook-signature.js";
import type { BridgeProcess } from "./bridge-process.js";
import { TEST_WEBHOOK_SECRET } from "./http.js";
import { acquireWhenReady } from "./leases.js";

/** The fleet of the heaviest requests: 100,000 nodes, one in a hundred in the fleet shard. */
export const HEAVY_NODES = 100_000;
/** The most nodes one bulk request takes (the API's limit). */
export const HEAVY_BULK = 20_000;
/** Shards and agents a bridge serving the heavy fleet must know. */
export const HEAVY_SHARDS = ["fleet-a", "probe"];
export const HEAVY_AGENTS = ["fleet-0", "probe-0", "legacy-0", "legacy-1"];

/** One request as a load generator sends it. */
export interface HeavyRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface HeavyFleet {
  /** every heavy route at the size the API accepts, by what it is */
  heavy: Array<{ what: string; request: HeavyRequest }>;
  /** a renew of the probe shard's lease, and of the fleet shard's (its holder must keep it) */
  renewProbe: HeavyRequest;
  renewFleet: HeavyRequest;
}

/**
 * Load `bridge` with the fleet the heaviest requests need — 100,000 nodes in bulks of
 * 20,000, two legacy-pool agents sharing 99,000 unsharded nodes, a fleet shard of 1,000
 * whose feed holds 1,000 trait changes, and an inspection result near the webhook's 1 MiB
 * limit — then take the fleet and probe leases, and name each heavy request at its limit.
 * `uuid(n)` mints node n's uuid (counting uuids pile into one index bucket: a harder case
 * than Ironic's random ones). The leases last one TTL unrenewed: the caller keeps them.
 */
export async function loadHeavyFleet(
  bridge: BridgeProcess,
  uuid: (n: number) => string,
): Promise<HeavyFleet> {
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
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`POST ${path}: ${res.status}`);
  };
  const nodes = Array.from({ length: HEAVY_NODES }, (_, i) => ({
    uuid: uuid(i + 1),
    name: `node-${i}`,
    shard: i % 100 === 0 ? "fleet-a" : null,
    conductor_group: "",
    instance_host: null,
  }));
  for (let i = 0; i < HEAVY_NODES; i += HEAVY_BULK)
    await post("/v1/nodes/bulk", { nodes: nodes.slice(i, i + HEAVY_BULK) }, bridge.tokenFor("admin"));
  for (const agent of ["legacy-0", "legacy-1"])
    await post(`/v1/agents/${agent}/heartbeat`, { shards: [] }, bridge.tokenOf(agent));
  await post("/v1/agents/fleet-0/heartbeat", { shards: ["fleet-a"] }, bridge.tokenOf("fleet-0"));
  // A feed of 1,000 entries for the fleet shard's holder to read.
  const sharded = nodes.filter((n) => n.shard !== null);
  for (let i = 0; i < 1000; i += 50)
    await Promise.all(
      Array.from({ length: 50 }, async (_, j) => {
        const body = JSON.stringify({
          kind: "deltas",
          node: sharded[(i + j) % sharded.length]!.uuid,
          deltas: [`+CUSTOM_T${i + j}`],
        });
        const res = await fetch(`${bridge.url}/v1/inspector/webhook`, {
          method: "POST",
          headers: as(
            bridge.tokenFor("inspector"),
            signedHeaders(TEST_WEBHOOK_SECRET, body, Date.now() / 1000),
          ),
          body,
        });
        await res.arrayBuffer();
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
  if (inspection.length < 900_000 || inspection.length > 1024 * 1024)
    throw new Error(`the inspection result is ${inspection.length} bytes, not near 1 MiB`);
  const acquire = (shard: string, agent: string) =>
    acquireWhenReady(new BridgeClient(bridge.url, bridge.tokenOf(agent)), shard, agent);
  const fleetToken = await acquire("fleet-a", "fleet-0");
  const probeToken = await acquire("probe", "probe-0");
  const renew = (shard: string, agent: string, leaseToken: number): HeavyRequest => ({
    method: "POST",
    path: `/v1/shards/${shard}/lease`,
    headers: as(bridge.tokenOf(agent)),
    body: JSON.stringify({ agent, token: leaseToken }),
  });
  const heavy: HeavyFleet["heavy"] = [
    {
      what: "a legacy agent's nodes (its ring share of 99,000)",
      request: { method: "GET", path: "/v1/agents/legacy-0/nodes", headers: as(bridge.tokenFor("admin")) },
    },
    {
      what: "the fleet agent's nodes (a 1,000-node shard)",
      request: {
        method: "GET",
        path: `/v1/agents/fleet-0/nodes?token=${fleetToken}`,
        headers: as(bridge.tokenOf("fleet-0")),
      },
    },
    {
      what: "a bulk of 20,000 nodes",
      request: {
        method: "POST",
        path: "/v1/nodes/bulk",
        headers: as(bridge.tokenFor("admin")),
        body: JSON.stringify({ nodes: nodes.slice(0, HEAVY_BULK) }),
      },
    },
    {
      // An operator's mistake at full size: a refusal that listed every node's problem was
      // 14 MB, built on the event loop.
      what: "a bulk of 20,000 nodes, each lacking its shard (400)",
      request: {
        method: "POST",
        path: "/v1/nodes/bulk",
        headers: as(bridge.tokenFor("admin")),
        body: JSON.stringify({
          nodes: nodes.slice(0, HEAVY_BULK).map(({ shard: _left, ...lacking }) => lacking),
        }),
      },
    },
    {
      // Half a megabyte that is no list of shard names, decoded off the event loop and refused.
      what: "a heartbeat of 500 KiB naming no shard (400)",
      request: {
        method: "POST",
        path: "/v1/agents/legacy-1/heartbeat",
        headers: as(bridge.tokenOf("legacy-1")),
        body: `{"shards":[${Array(250_000).fill("0").join(",")}]}`,
      },
    },
    {
      what: "a page of 10,000 nodes",
      request: { method: "GET", path: "/v1/nodes?limit=10000", headers: as(bridge.tokenFor("admin")) },
    },
    {
      what: "GET /v1/shards (100,000 nodes counted)",
      request: { method: "GET", path: "/v1/shards", headers: as(bridge.tokenFor("admin")) },
    },
    {
      what: "a feed read of 1,000 entries",
      request: {
        method: "GET",
        path: `/v1/shards/fleet-a/feed?token=${fleetToken}&limit=1000`,
        headers: as(bridge.tokenOf("fleet-0")),
      },
    },
    {
      what: "an inspection result of 1 MiB",
      request: {
        method: "POST",
        path: "/v1/inspector/webhook",
        headers: as(
          bridge.tokenFor("inspector"),
          signedHeaders(TEST_WEBHOOK_SECRET, inspection, Date.now() / 1000),
        ),
        body: inspection,
      },
    },
  ];
  return {
    heavy,
    renewProbe: renew("probe", "probe-0", probeToken),
    renewFleet: renew("fleet-a", "fleet-0", fleetToken),
  };
}

/** Write `requests` where test/fixtures/http-load.ts reads them (--requests FILE). */
export function writeRequests(dir: string, name: string, requests: HeavyRequest[]): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(requests));
  return file;
}
