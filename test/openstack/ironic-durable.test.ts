import { untilTrue } from "../helpers/until.js";
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { IronicClient } from "../../src/upstream/ironic-client.js";
import { DEFAULT_OWNER_TTL_MS } from "../../src/bridge/ironic/delivery.js";
import { toBridgeNodes } from "../../src/bridge/ironic/sync.js";
import { IRONIC_PARTITIONS, partitionOf } from "../../src/store/ports/ironic-queue.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import {
  callSteps,
  ironicTraits,
  stepDeltas,
  stepsInOrder,
  untilBridgeDrained,
} from "../helpers/delivery.js";
import { bridgeTraitNames, postWebhook } from "../helpers/http.js";
import { createIronicNode, useIronicPeer, type IronicPeer } from "../helpers/ironic-peer.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/** Seconds a bridge owns its part of the queue: a dead one's part is taken over after this long. */
const OWNER_TTL_S = 4;

/**
 * Uuids for `count` nodes, dealt in turn to the partitions of each bridge (`owned`, one
 * list a bridge), so that each has changes to deliver. Left to Ironic's random uuids, the
 * eight nodes of a case fall all in the other bridge's partitions in one run of 256 (half
 * the partitions each), and the bridge to kill never has a call in flight to wait for.
 */
function uuidsAcross(owned: number[][], count: number): string[] {
  const uuids: string[] = [];
  while (uuids.length < count) {
    const uuid = randomUUID();
    if (owned[uuids.length % owned.length]!.includes(partitionOf(uuid, IRONIC_PARTITIONS))) uuids.push(uuid);
  }
  return uuids;
}

/**
 * The case: `serve` processes on one Redis deliver trait changes to the real
 * Ironic; Ironic is frozen (SIGSTOP) so changes queue, and the bridge that owns them is
 * killed -9 with calls in flight. After its restart, or on the other bridge, every change
 * lands in Ironic, in order (judged by Ironic's own log), and Ironic ends with the
 * bridge's traits.
 */
describe("Durable delivery to Ironic: kill -9 of a bridge with deliveries pending", function () {
  this.timeout(300_000);
  const ironicPeer = useIronicPeer("Durable delivery fault tests");
  let ironic: IronicPeer;
  let redis: TestRedisServer;
  const running: BridgeProcess[] = [];

  before(async () => {
    ironic = ironicPeer.peer;
    redis = await TestRedisServer.start();
  });
  after(async () => {
    await redis?.stop();
  });
  beforeEach(async () => {
    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();
  });
  afterEach(async () => {
    ironic.thaw(); // whatever happened, Ironic runs again for the next test
    for (const bridge of running.splice(0)) await bridge.stop();
  });

  /** A bridge on the shared Redis; `ownerTtlS` null: the default owner TTL. */
  const serve = async (ownerTtlS: number | null = OWNER_TTL_S) => {
    const bridge = await startBridge({
      shards: [],
      agents: [],
      store: redis.url,
      args: [
        "--ironic",
        ironic.endpoint,
        ...(ownerTtlS === null ? [] : ["--ironic-owner-ttl", String(ownerTtlS)]),
      ],
    });
    running.push(bridge);
    return bridge;
  };
  /** Two bridges, each owning some partitions and together all (`shares`: a's, then b's). */
  const twoBridges = async (ownerTtlS: number | null = OWNER_TTL_S) => {
    const a = await serve(ownerTtlS);
    const b = await serve(ownerTtlS);
    let shares: number[][] = [];
    await untilTrue(
      "both bridges own partitions, all of them between them",
      async () => {
        shares = [(await delivery(a)).this_bridge.partitions, (await delivery(b)).this_bridge.partitions];
        const all = Array.from({ length: IRONIC_PARTITIONS }, (_, p) => p).join();
        const between = shares.flat().sort((x, y) => x - y);
        return shares.every((partitions) => partitions.length > 0) && between.join() === all;
      },
      60_000,
    );
    return { a, b, shares };
  };
  /** Until `bridge` has calls in flight to the frozen Ironic. */
  const callsInFlight = (bridge: BridgeProcess) =>
    untilTrue(
      "calls in flight to the frozen Ironic",
      async () => (await delivery(bridge)).this_bridge.calls_in_flight > 0,
      60_000,
    );
  /** Once `bridge` has calls in flight to the frozen Ironic: the partitions it owns. */
  const stuckPartitions = async (bridge: BridgeProcess): Promise<number[]> => {
    await callsInFlight(bridge);
    return (await delivery(bridge)).this_bridge.partitions as number[];
  };
  const delivery = async (bridge: BridgeProcess): Promise<Record<string, any>> =>
    (
      await fetch(`${bridge.url}/v1/ironic/delivery`, {
        headers: { authorization: `Bearer ${bridge.tokenFor("admin")}` },
      })
    ).json();
  /** Step `k` of each node, through the inspector webhook of `bridge` (nodes in parallel). */
  const steps = (bridge: BridgeProcess, nodes: string[], k: number) =>
    Promise.all(
      nodes.map(async (node) => {
        const token = bridge.tokenFor("inspector");
        const answer = await postWebhook(
          bridge.url,
          { kind: "deltas", node, deltas: stepDeltas(k) },
          { token },
        );
        expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      }),
    );
  /**
   * Nodes in Ironic (with `uuids` when given), loaded into the bridge, each with step 1
   * delivered (Ironic running).
   */
  async function prepared(bridge: BridgeProcess, names: string[], uuids?: string[]): Promise<string[]> {
    const nodes = await Promise.all(
      names.map((name, i) =>
        createIronicNode(ironic.endpoint, {
          name,
          shard: "rack-a",
          ...(uuids !== undefined && { uuid: uuids[i]! }),
        }),
      ),
    );
    const loaded = await fetch(`${bridge.url}/v1/nodes/bulk`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.tokenFor("admin")}`, "content-type": "application/json" },
      body: JSON.stringify({ nodes: toBridgeNodes(await new IronicClient(ironic.endpoint).nodes()) }),
    });
    expect(loaded.status).to.equal(200);
    await steps(bridge, nodes, 1);
    await untilBridgeDrained(bridge.url, bridge.tokenFor("admin"), 60_000);
    return nodes;
  }

  /** Every node has CUSTOM_S{last} alone in Ironic and in the bridge, and Ironic took its steps in order. */
  async function expectDelivered(bridge: BridgeProcess, nodes: string[], last: number): Promise<void> {
    const calls = ironic.traitCalls();
    for (const node of nodes) {
      expect(await ironicTraits(ironic.endpoint, node), `node ${node} in Ironic`).to.deep.equal([
        `CUSTOM_S${last}`,
      ]);
      expect(await bridgeTraitNames(bridge.url, node, bridge.tokenFor("admin"))).to.deep.equal([
        `CUSTOM_S${last}`,
      ]);
      const taken = callSteps(calls, node);
      expect(stepsInOrder(taken), `node ${node}: steps in Ironic's log ${taken}`).to.equal(true);
      expect(taken.at(-1)).to.equal(last);
    }
  }

  it("after the restart every change lands in Ironic, in order, and Ironic ends with the bridge's traits", async () => {
    const bridge = await serve();
    const nodes = await prepared(
      bridge,
      [1, 2, 3, 4, 5, 6].map((i) => `restart-${i}`),
    );
    ironic.freeze();
    for (let k = 2; k <= 5; k++) await steps(bridge, nodes, k);
    const queued = 6 * 4 * 2; // six nodes, steps 2 to 5, two changes a step
    await callsInFlight(bridge);
    expect((await delivery(bridge)).pending_changes).to.equal(queued);

    await bridge.restart(); // kill -9, then `serve` again on the same store
    const after = await delivery(bridge);
    expect(after.durable).to.equal(true);
    expect(after.pending_changes, "nothing lost with the bridge").to.equal(queued);
    ironic.thaw();
    const done = await untilBridgeDrained(bridge.url, bridge.tokenFor("admin"), 120_000);
    expect(done.batches.given_up).to.equal(0);
    await expectDelivered(bridge, nodes, 5);
  });

  it("on the other bridge: it takes the dead one's partitions and delivers every change in order", async () => {
    const { a, b, shares } = await twoBridges();
    const nodes = await prepared(
      a,
      [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `takeover-${i}`),
      uuidsAcross(shares, 8),
    );
    ironic.freeze();
    // Steps through both bridges, alternately: the queue is one.
    for (let k = 2; k <= 5; k++) await steps(k % 2 === 0 ? a : b, nodes, k);
    const lost = await stuckPartitions(a);
    await a.serve.kill();
    // b takes a's partitions once their leases have expired (one TTL), while Ironic is still frozen.
    await untilTrue(
      "b owns every partition",
      async () => (await delivery(b)).this_bridge.partitions.length === 16,
      (OWNER_TTL_S * 3 + 10) * 1000,
    );
    expect(lost.length).to.be.above(0);
    ironic.thaw();
    const done = await untilBridgeDrained(b.url, b.tokenFor("admin"), 120_000);
    expect(done.batches.given_up).to.equal(0);
    await expectDelivered(b, nodes, 5);
  });

  /** When (this process's monotonic ms) `bridge` logged each partition owned since `from`. */
  const ownedAt = (bridge: BridgeProcess, from: number): Map<number, number> =>
    new Map(
      bridge.serve.events
        .filter((e) => e.ev === "ironic-partition-owned" && e.seenAt >= from)
        .map((e) => [e.partition as number, e.seenAt]),
    );

  /** Direct calls to Ironic, `concurrency` at a time: a PUT and a DELETE per node and round; answers calls/s. */
  async function directRate(nodes: string[], rounds: number, concurrency: number): Promise<number> {
    const client = new IronicClient(ironic.endpoint);
    const work = nodes.flatMap((node) => Array.from({ length: rounds }, () => node));
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let node = work.shift(); node !== undefined; node = work.shift()) {
          await client.addTrait(node, "CUSTOM_DIRECT");
          await client.removeTrait(node, "CUSTOM_DIRECT");
        }
      }),
    );
    return (nodes.length * rounds * 2) / ((performance.now() - started) / 1000);
  }

  it("takeover, measured from the bridges' logs: the other bridge owns the dead one's partitions within the owner TTL + 1 s, then delivers at Ironic's direct rate", async () => {
    const ttlMs = DEFAULT_OWNER_TTL_MS;
    const { a, b, shares } = await twoBridges(null);
    const nodes = await prepared(
      a,
      Array.from({ length: 24 }, (_, i) => `measured-${i}`),
      uuidsAcross(shares, 24),
    );
    const direct = await directRate(nodes, 4, 8);
    ironic.freeze();
    for (let k = 2; k <= 5; k++) await steps(k % 2 === 0 ? a : b, nodes, k);
    const lost = await stuckPartitions(a);
    expect(lost.length).to.be.above(0);
    await a.serve.kill();
    const killedAt = performance.now();
    ironic.thaw();
    await untilTrue(
      "b owns every partition",
      async () => (await delivery(b)).this_bridge.partitions.length === 16,
      ttlMs * 3,
    );
    const owned = ownedAt(b, killedAt);
    const takeoverMs = Math.max(...lost.map((p) => owned.get(p)! - killedAt));
    const done = await untilBridgeDrained(b.url, b.tokenFor("admin"), 120_000);
    expect(done.batches.given_up).to.equal(0);
    // What b delivered of a's partitions, by its own log lines, after it owned them.
    const delivered = b.serve.events.filter(
      (e) => e.ev === "ironic-traits" && e.seenAt >= killedAt && lost.includes(e.partition as number),
    );
    const lastMs = Math.max(...delivered.map((e) => e.seenAt)) - killedAt;
    const calls = delivered.reduce((n, e) => n + (e.change as string[]).length, 0);
    const rate = calls / ((lastMs - takeoverMs) / 1000);
    console.log(
      `      owner TTL ${ttlMs} ms: a's ${lost.length} partitions owned by b ${Math.round(takeoverMs)} ms after the kill; ` +
        `their ${delivered.length} changes (${calls} calls) in Ironic ${Math.round(lastMs)} ms after it: ` +
        `${rate.toFixed(0)} calls/s after the takeover, direct PUT/DELETE ${direct.toFixed(0)} calls/s`,
    );
    expect(takeoverMs, "takeover within the owner TTL + 1 s").to.be.at.most(ttlMs + 1000);
    await expectDelivered(b, nodes, 5);
  });

  it("restarted on its own address, a bridge takes its own partitions back at once (the lease rules give its name a new token); a second process cannot take that name while it lives", async () => {
    const ttlMs = DEFAULT_OWNER_TTL_MS;
    const { a, b, shares } = await twoBridges(null);
    const nodes = await prepared(
      a,
      Array.from({ length: 12 }, (_, i) => `own-${i}`),
      uuidsAcross(shares, 12),
    );
    const worker = (await delivery(a)).this_bridge.worker as string;
    ironic.freeze();
    for (let k = 2; k <= 5; k++) await steps(a, nodes, k);
    const lost = await stuckPartitions(a);
    // Each of them renewed at least once before the kill: a lease its holder never renewed
    // is refused to the same name until it ends (docs/API.md, Leases), the restart included.
    const lastOwned = Math.max(...[...ownedAt(a, 0).values()]);
    await new Promise((r) => setTimeout(r, Math.max(0, lastOwned + ttlMs / 3 + 500 - performance.now())));
    const killedAt = performance.now();
    await a.restart(); // kill -9, then serve again on the same port
    const listening = a.serve.events.find((e) => e.ev === "listening")!.seenAt;
    ironic.thaw();
    await untilTrue(
      "every partition of a's owned again",
      async () => {
        const [da, db] = [await delivery(a), await delivery(b)];
        const now = [...da.this_bridge.partitions, ...db.this_bridge.partitions] as number[];
        return lost.every((p) => now.includes(p));
      },
      ttlMs * 3,
    );
    expect((await delivery(a)).this_bridge.worker).to.equal(worker);
    const byA = ownedAt(a, killedAt);
    const byB = ownedAt(b, killedAt);
    const back = lost.filter((p) => byA.has(p) && !byB.has(p));
    const backMs = Math.max(...back.map((p) => byA.get(p)! - listening));
    console.log(
      `      restarted ${Math.round(listening - killedAt)} ms after the kill; ${back.length} of its ${lost.length} ` +
        `partitions its own again ${Math.round(backMs)} ms after it listened (${lost.length - back.length} taken by the other)`,
    );
    // The other bridge takes them only when the restart is slower than two thirds of a TTL.
    if (listening - killedAt < (2 * ttlMs) / 3) expect(back).to.have.members(lost);
    if (back.length > 0) expect(backMs, "taken back at once").to.be.below(1000);
    const done = await untilBridgeDrained(a.url, a.tokenFor("admin"), 120_000);
    expect(done.batches.given_up).to.equal(0);
    await expectDelivered(a, nodes, 5);

    // A second `serve` on a's address while a lives cannot listen, so never delivers.
    const second = await startBridge({
      shards: [],
      agents: [],
      store: redis.url,
      args: ["--ironic", ironic.endpoint, "--port", new URL(a.url).port],
    }).then(
      (bridge) => bridge,
      (error: Error) => error,
    );
    expect(String(second)).to.match(/serve exited with 1/);
  });
});
