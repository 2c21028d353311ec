import { untilTrue } from "../helpers/until.js";
import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { IronicClient } from "../../src/upstream/ironic-client.js";
import { IronicQueueDelivery, type IronicDeliveryOptions } from "../../src/bridge/ironic/delivery.js";
import { toBridgeNodes } from "../../src/bridge/ironic/sync.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { sharedServer } from "../helpers/backends.js";
import { callSteps, ironicTraits, stepDeltas, stepsInOrder, untilDrained } from "../helpers/delivery.js";
import { exampleInspector } from "../helpers/examples.js";
import { bridgeTraitNames, call, listen, postWebhook, testAuthority, wholeNode } from "../helpers/http.js";
import { createIronicNode, useIronicPeer, type IronicPeer } from "../helpers/ironic-peer.js";
import type { TestRedisServer } from "../helpers/redis-server.js";

/** A bridge in this process: its own store connection, app and delivery worker, on the shared Redis. */
interface Bridge {
  base: string;
  store: Store;
  delivery: IronicQueueDelivery;
  close(): Promise<void>;
}

/**
 * Delivery of trait changes to the real Ironic from a queue in Redis: bridges in this
 * process on a private redis-server, each with its own connection as a `serve` would
 * have. Faults come from Ironic itself: a node locked by another conductor (its own
 * reservation record), a node it does not know. Order is judged by Ironic's own log.
 * (Bridges as processes, killed -9 with Ironic frozen: test/openstack/ironic-durable.test.ts.)
 */
describe("Durable delivery to the real Ironic, on Redis", function () {
  this.timeout(240_000);
  const ironicPeer = useIronicPeer("Durable delivery tests");
  let ironic: IronicPeer;
  let client: IronicClient;
  let redis: TestRedisServer;
  const bridges: Bridge[] = [];

  before(async () => {
    ironic = ironicPeer.peer;
    client = new IronicClient(ironic.endpoint);
    redis = await sharedServer();
  });
  beforeEach(async () => {
    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();
  });
  afterEach(async () => {
    for (const bridge of bridges.splice(0)) await bridge.close();
  });

  /** A bridge; its delivery started unless `start` is false. Short timings: tests wait them out. */
  async function bridge(
    options: Partial<IronicDeliveryOptions> & { queueMax?: number; start?: boolean } = {},
  ): Promise<Bridge> {
    const { queueMax, start = true, ...delivering } = options;
    const store = await openStore(redis.url, queueMax === undefined ? {} : { ironicQueueMax: queueMax });
    const delivery = new IronicQueueDelivery(store.traits.ironicQueue, store.ironicOwners, {
      endpoint: ironic.endpoint,
      ownerTtlMs: 8000,
      pollMs: 50,
      standbyPollMs: 200,
      quietMs: 500,
      retry: { backoffMs: 100, maxBackoffMs: 1000, goneAttempts: 3 },
      ...delivering,
    });
    if (start) delivery.start();
    const served = await listen(
      bridgeApp(store, { authority: testAuthority(), inspector: exampleInspector(), ironic: delivery }),
    );
    const made: Bridge = {
      base: served.url,
      store,
      delivery,
      close: async () => {
        await made.delivery.stop();
        await served.close();
        await store.close();
      },
    };
    bridges.push(made);
    return made;
  }

  /** Ironic's nodes, loaded into the bridge as `ironic-sync` would. */
  const loadNodes = async (b: Bridge) =>
    expect(
      (await call(`${b.base}/v1/nodes/bulk`, "POST", { nodes: toBridgeNodes(await client.nodes()) })).status,
    ).to.equal(200);
  const step = async (b: Bridge, node: string, k: number) =>
    expect((await postWebhook(b.base, { kind: "deltas", node, deltas: stepDeltas(k) })).status).to.equal(200);
  const report = async (b: Bridge) => (await call(`${b.base}/v1/ironic/delivery`, "GET")).body;
  it("retries a node locked by another conductor (409) until its changes land, in order, while other nodes go on", async () => {
    // A locked change waits in Ironic about 2 s before the 409: the call timeout (TTL/4) must be longer.
    const b = await bridge({ ownerTtlMs: 12_000 });
    const locked = await createIronicNode(ironic.endpoint, { name: "locked-1", shard: "rack-a" });
    const free = await createIronicNode(ironic.endpoint, { name: "free-1", shard: "rack-a" });
    await loadNodes(b);
    ironic.reserve(locked, "conductor-elsewhere");
    for (const k of [1, 2, 3]) await step(b, locked, k);
    await step(b, free, 1);

    await untilTrue("the free node's change in Ironic", async () =>
      (await ironicTraits(ironic.endpoint, free)).includes("CUSTOM_S1"),
    );
    await untilTrue("a 409 retried", async () => (await report(b)).batches.retried >= 1);
    const waiting = await report(b);
    expect(waiting).to.include({ durable: true });
    expect(waiting.pending_changes).to.equal(5); // 1 + 2 + 2: the locked node's three steps
    expect(waiting.oldest_pending_ms).to.be.above(0);
    expect(waiting.this_bridge.partitions).to.have.length(16);
    expect(await ironicTraits(ironic.endpoint, locked)).to.deep.equal([]);
    expect(ironic.traitCalls().some((c) => c.node === locked && c.status === 409)).to.equal(true);

    ironic.reserve(locked, null);
    await untilDrained(b.delivery, 60_000);
    expect(await ironicTraits(ironic.endpoint, locked)).to.deep.equal(["CUSTOM_S3"]);
    expect(await ironicTraits(ironic.endpoint, locked)).to.deep.equal(await bridgeTraitNames(b.base, locked));
    const steps = callSteps(
      ironic.traitCalls().filter((c) => c.status !== 409),
      locked,
    );
    expect(stepsInOrder(steps), `steps in Ironic's log: ${steps}`).to.equal(true);
    const after = await report(b);
    expect(after.batches).to.include({ delivered: 4, given_up: 0 });
    const metrics = await (await fetch(`${b.base}/metrics`)).text();
    expect(metrics).to.match(/^shardbridge_ironic_pending_changes 0$/m);
    expect(metrics).to.match(/^shardbridge_ironic_owned_partitions 16$/m);
    expect(metrics).to.match(/^shardbridge_ironic_batches_total\{outcome="delivered"\} 4$/m);
  });

  it("records the changes of a node Ironic does not know (404), in order, and holds nothing else up", async () => {
    const b = await bridge();
    const ghost = "6d6f6e6f-0000-4000-8000-0000000000aa";
    const real = await createIronicNode(ironic.endpoint, { name: "real-1", shard: "rack-a" });
    await loadNodes(b);
    await call(`${b.base}/v1/nodes/bulk`, "POST", { nodes: [wholeNode({ uuid: ghost, shard: "rack-a" })] });
    await step(b, ghost, 1);
    await step(b, ghost, 2);
    await step(b, real, 1);
    await untilDrained(b.delivery);
    expect(await ironicTraits(ironic.endpoint, real)).to.deep.equal(["CUSTOM_S1"]);
    // A later change of the node is tried too (it may be back), and recorded again.
    await step(b, ghost, 3);
    await untilDrained(b.delivery);
    const answer = await report(b);
    expect(answer.batches).to.include({ given_up: 3, delivered: 1 });
    expect(answer.pending_changes).to.equal(0);
    expect(
      answer.undeliverable.map((u: { node: string; changes: string[] }) => [u.node, u.changes]),
    ).to.deep.equal([3, 2, 1].map((k) => [ghost, stepDeltas(k)]));
    expect(answer.undeliverable[0].reason).to.match(
      /^node not found in Ironic \(404\): Node .* could not be found/,
    );
    expect(Date.parse(answer.undeliverable[0].at)).to.be.closeTo(Date.now(), 30_000);
  });

  it("records a standard trait this Ironic's os-traits does not know (400), and delivers the node's later changes", async () => {
    // HW_CPU_X86_AMXTILE: not in os-traits 2.9.0 (Ironic 21.4's); the bridge takes it (os-traits 3.9.0).
    const b = await bridge();
    const node = await createIronicNode(ironic.endpoint, { name: "amx-1", shard: "rack-a" });
    await loadNodes(b);
    const added = await postWebhook(b.base, { kind: "deltas", node, deltas: ["+HW_CPU_X86_AMXTILE"] });
    expect(added.status).to.equal(200);
    await step(b, node, 1);
    await untilDrained(b.delivery);
    expect(await ironicTraits(ironic.endpoint, node)).to.deep.equal(["CUSTOM_S1"]);
    const answer = await report(b);
    expect(answer.batches).to.include({ given_up: 1, delivered: 1 });
    expect(
      answer.undeliverable.map((u: { node: string; changes: string[] }) => [u.node, u.changes]),
    ).to.deep.equal([[node, ["+HW_CPU_X86_AMXTILE"]]]);
    expect(answer.undeliverable[0].reason).to.match(/^Ironic refused the change \(400\): /);
  });

  it("past the queue's bound folds a node's changes, and Ironic still ends with the bridge's traits", async () => {
    // 16 entries over 16 partitions: each partition queues one commit, then folds.
    const b = await bridge({ queueMax: 16, start: false });
    const nodes = await Promise.all(
      [1, 2, 3].map((i) => createIronicNode(ironic.endpoint, { name: `folded-${i}`, shard: "rack-a" })),
    );
    await loadNodes(b);
    for (let k = 1; k <= 6; k++) await Promise.all(nodes.map((node) => step(b, node, k)));
    const before = await report(b);
    expect(before.coalesced_changes).to.be.above(0);
    expect(before.queue.folded_nodes).to.equal(3);
    b.delivery.start();
    await untilDrained(b.delivery);
    for (const node of nodes) {
      expect(await ironicTraits(ironic.endpoint, node)).to.deep.equal(["CUSTOM_S6"]);
      expect(await bridgeTraitNames(b.base, node)).to.deep.equal(["CUSTOM_S6"]);
    }
    const after = await report(b);
    expect(after.queue).to.include({ folded_nodes: 0, queued_batches: 0 });
    expect(after.batches.given_up).to.equal(0);
  });

  it("two bridges share the partitions, hand them over, and never reorder a node's changes", async () => {
    const a = await bridge();
    const nodes = await Promise.all(
      [1, 2, 3, 4, 5, 6, 7, 8].map((i) =>
        createIronicNode(ironic.endpoint, { name: `two-${i}`, shard: "rack-a" }),
      ),
    );
    await loadNodes(a);
    const b = await bridge();
    const STEPS = 12;
    const owned = async (x: Bridge) => (await x.delivery.stats()).worker.partitions.length;
    const shared = () =>
      untilTrue("both bridges own partitions", async () => (await owned(a)) > 0 && (await owned(b)) > 0);
    for (let k = 1; k <= STEPS; k++) {
      // Each node's steps alternate between the bridges; nodes go in parallel.
      await Promise.all(nodes.map((node, i) => step((k + i) % 2 === 0 ? a : b, node, k)));
      // A had them all; B joined: A hands some over while changes are queued.
      if (k === 2) await shared();
      if (k === 4) {
        // A hands its partitions over (as on SIGTERM), B goes on with them.
        await a.delivery.stop();
      }
      if (k === 8) {
        // A delivers again: the partitions are shared anew, mid-stream.
        a.delivery = new IronicQueueDelivery(a.store.traits.ironicQueue, a.store.ironicOwners, {
          endpoint: ironic.endpoint,
          ownerTtlMs: 8000,
          pollMs: 50,
          standbyPollMs: 200,
          quietMs: 500,
        }).start();
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    await untilDrained(b.delivery, 60_000);
    await shared();
    expect((await owned(a)) + (await owned(b))).to.equal(16);
    // Both delivered (the counts are each bridge's own).
    for (const x of [a, b]) expect((await x.delivery.stats()).worker.delivered).to.be.above(0);
    const calls = ironic.traitCalls();
    for (const node of nodes) {
      expect(await ironicTraits(ironic.endpoint, node)).to.deep.equal([`CUSTOM_S${STEPS}`]);
      const steps = callSteps(calls, node);
      expect(stepsInOrder(steps), `node ${node}: steps in Ironic's log ${steps}`).to.equal(true);
      expect(steps.at(-1)).to.equal(STEPS);
    }
  });
});
