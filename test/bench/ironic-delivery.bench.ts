import { IronicClient } from "../../src/upstream/ironic-client.js";
import { DEFAULT_OWNER_TTL_MS } from "../../src/bridge/ironic/delivery.js";
import { toBridgeNodes } from "../../src/bridge/ironic/sync.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { untilBridgeDrained } from "../helpers/delivery.js";
import { postWebhook } from "../helpers/http.js";
import { createIronicNode, ironicPeersAvailable, startIronic } from "../helpers/ironic-peer.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { openStore } from "../../src/store/open.js";
import { TraitService } from "../../src/bridge/trait-service.js";
import { OwnershipRegistry } from "../../src/core/traits/ownership.js";
import { closedLoop, printTable } from "./stats.js";

const NODES = 20;
/** commits per node, one trait each: NODES x CHANGES single-trait calls per run */
const CHANGES = 10;
/** Ironic calls in flight: the bridge's --ironic-concurrency and the direct baseline's callers */
const CONCURRENCY = 8;
/** The bridge's default owner TTL (the shard leases' default): what a restart costs out of the box. */
const OWNER_TTL_S = DEFAULT_OWNER_TTL_MS / 1000;

/**
 * Delivery to the real Ironic through the queue in Redis, beside the same single-trait
 * calls made straight to Ironic in the same run (same concurrency): what the queue, the
 * ownership and the per-node order cost. Then the lag a bridge restart adds: changes
 * queued, the bridge killed -9 and started again; how long until it owns the queue again
 * (its dead self's leases must expire: one owner TTL) and until every change is in Ironic.
 */
export async function ironicDeliveryBench(): Promise<void> {
  if (!ironicPeersAvailable()) {
    process.stdout.write("ironic delivery bench: ../shared/peers not found, skipped\n");
    return;
  }
  const ironic = await startIronic();
  const redis = await TestRedisServer.start();
  let bridge: BridgeProcess | undefined;
  try {
    const client = new IronicClient(ironic.endpoint);
    const nodes = await Promise.all(
      Array.from({ length: NODES }, (_, i) => createIronicNode(ironic.endpoint, { name: `bench-${i}` })),
    );
    // Every phase starts from nodes without traits: Ironic's cost per call grows with a
    // node's traits, and a node takes 50 at most.
    const reset = () =>
      Promise.all(
        nodes.map(async (node) => {
          const res = await fetch(`${ironic.endpoint}/v1/nodes/${node}/traits`, {
            method: "PUT",
            headers: { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" },
            body: JSON.stringify({ traits: [] }),
          });
          if (res.status !== 204) throw new Error(`clearing ${node}'s traits: ${res.status}`);
        }),
      );
    // Direct: each node's traits in order (one caller per node at a time), CONCURRENCY callers.
    const calls = nodes.flatMap((node) => Array.from({ length: CHANGES }, (_, k) => ({ node, k })));
    const byNode = nodes.map((node) => calls.filter((c) => c.node === node));
    const directRun = async () => {
      await reset();
      const run = await closedLoop(byNode.length, CONCURRENCY, async (i) => {
        for (const { node, k } of byNode[i]!) await client.addTrait(node, `CUSTOM_DIRECT_${k}`);
      });
      return (run.opsPerSec * calls.length) / byNode.length;
    };
    const directBefore = await directRun();

    bridge = await startBridge({
      shards: [],
      agents: [],
      store: redis.url,
      args: [...["--ironic", ironic.endpoint], ...["--ironic-concurrency", String(CONCURRENCY)]],
      env: { SHARDBRIDGE_LOG_LEVEL: "warn" },
    });
    const b = bridge;
    const admin = b.tokenFor("admin");
    const inspector = b.tokenFor("inspector");
    await fetch(`${b.url}/v1/nodes/bulk`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ nodes: toBridgeNodes(await client.nodes()) }),
    });
    // A fresh Redis holds new leases for one TTL after its start: wait until the bridge owns the queue.
    await untilOwned(b, admin, 16, (OWNER_TTL_S + 10) * 1000);
    const commit = (node: string, trait: string) =>
      postWebhook(b.url, { kind: "deltas", node, deltas: [`+${trait}`] }, { token: inspector });
    const queueAll = (prefix: string) =>
      Promise.all(
        nodes.map(async (node) => {
          for (let k = 0; k < CHANGES; k++) await commit(node, `CUSTOM_${prefix}_${k}`);
        }),
      );

    // Through the bridge, commits through its webhook while it delivers: from the first
    // commit until Ironic has every change.
    await reset();
    const started = performance.now();
    await queueAll("QUEUED");
    const queuedS = (performance.now() - started) / 1000;
    await untilBridgeDrained(b.url, admin, 600_000);
    const deliveredS = (performance.now() - started) / 1000;
    const deliveredPerS = calls.length / deliveredS;

    // Delivery alone: the bridge frozen (shorter than a third of its owner TTL, so it keeps
    // its partitions) while this process commits every change to the store; from SIGCONT
    // until Ironic has them all.
    await reset();
    const store = await openStore(redis.url);
    const traits = new TraitService(store.traits, store.nodes, new OwnershipRegistry(), { toIronic: true });
    b.serve.signal("SIGSTOP");
    try {
      await Promise.all(
        nodes.map(async (node) => {
          for (let k = 0; k < CHANGES; k++)
            await traits.applyExplicit(node, "inspector", undefined, [
              { sign: "+", trait: `CUSTOM_ALONE_${k}` },
            ]);
        }),
      );
    } finally {
      b.serve.signal("SIGCONT");
    }
    await store.close();
    const resumed = performance.now();
    await untilBridgeDrained(b.url, admin, 600_000);
    const aloneS = (performance.now() - resumed) / 1000;
    const alonePerS = calls.length / aloneS;

    const directAfter = await directRun();
    const directPerS = (directBefore + directAfter) / 2;

    // Restart: queue, kill -9 at once, start again; time from the new process's start.
    await reset();
    await queueAll("RESTART");
    const atKill = await report(b, admin);
    await b.restart();
    const restarted = performance.now();
    await untilOwned(b, admin, 16, (OWNER_TTL_S * 3 + 10) * 1000);
    const ownedS = (performance.now() - restarted) / 1000;
    await untilBridgeDrained(b.url, admin, 600_000);
    const drainedS = (performance.now() - restarted) / 1000;

    printTable(
      `Ironic delivery (real Ironic, Redis queue, ${NODES} nodes x ${CHANGES} changes, ${CONCURRENCY} calls in flight)`,
      ["path", "changes", "seconds", "changes/s", "ratio"],
      [
        [
          `direct single-trait PUTs (baseline: mean of ${directBefore.toFixed(2)} before, ${directAfter.toFixed(2)} after)`,
          String(calls.length),
          calls.length / directPerS,
          directPerS,
          "1.00x",
        ],
        [
          `through the bridge, committed by webhook meanwhile (in ${queuedS.toFixed(2)} s)`,
          String(calls.length),
          deliveredS,
          deliveredPerS,
          `${(deliveredPerS / directPerS).toFixed(2)}x`,
        ],
        [
          "through the bridge, all queued before (delivery alone)",
          String(calls.length),
          aloneS,
          alonePerS,
          `${(alonePerS / directPerS).toFixed(2)}x`,
        ],
      ],
    );
    printTable(
      `Lag after a bridge restart (kill -9 with changes queued; owner TTL ${OWNER_TTL_S} s)`,
      [
        "pending at kill",
        "restart -> owns the queue (s)",
        "restart -> all in Ironic (s)",
        "of which delivering (s)",
        "delivering: ratio to direct",
      ],
      [
        [
          String(atKill.pending_changes),
          ownedS,
          drainedS,
          drainedS - ownedS,
          `${(atKill.pending_changes / (drainedS - ownedS) / directPerS).toFixed(2)}x`,
        ],
      ],
    );
  } finally {
    await bridge?.stop();
    await redis.stop();
    ironic.stop();
  }
}

async function report(bridge: BridgeProcess, token: string): Promise<Record<string, any>> {
  return (
    await fetch(`${bridge.url}/v1/ironic/delivery`, { headers: { authorization: `Bearer ${token}` } })
  ).json();
}

async function untilOwned(bridge: BridgeProcess, token: string, partitions: number, timeoutMs: number) {
  const deadline = performance.now() + timeoutMs;
  while ((await report(bridge, token)).this_bridge.partitions.length < partitions) {
    if (performance.now() > deadline) throw new Error(`the bridge owns fewer than ${partitions} partitions`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
