import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { partitionOf, type IronicQueue, type MergedChange } from "../../src/store/ports/ironic-queue.js";
import type { Store } from "../../src/store/store.js";
import {
  memoryUnderTest,
  redisClusterUnderTest,
  redisUnderTest,
  useBackend,
  type BackendUnderTest,
} from "../helpers/backends.js";

/** A node uuid whose changes go to `partition`. */
function nodeIn(partition: number, partitions: number): string {
  for (;;) {
    const uuid = randomUUID();
    if (partitionOf(uuid, partitions) === partition) return uuid;
  }
}

/** Commit `deltas` on `node` over generation `expected`, queuing them for Ironic; answers whether it landed. */
const commit = (store: Store, node: string, expected: number, deltas: string[]) =>
  store.traits.commit(
    node,
    expected,
    { holders: {}, generation: expected + 1, lastOrder: {} },
    { ironic: { node, deltas, generation: expected + 1 } },
  );

/**
 * The queue of trait changes for Ironic, the same on every store: the embedded one,
 * a single Redis and a Redis Cluster (every script on one slot). No Ironic here: what
 * the queue keeps, hands out and takes off.
 */
for (const backend of [memoryUnderTest(), redisUnderTest(), redisClusterUnderTest()] as BackendUnderTest[]) {
  describe(`The queue of trait changes for Ironic (${backend.name})`, function () {
    this.timeout(60_000);

    describe("below its bound", () => {
      const ctx = useBackend(backend);
      let queue: IronicQueue;
      beforeEach(() => (queue = ctx.store.traits.ironicQueue));

      it("queues a commit's changes in the commit's own step, none for a commit that lost its compare-and-set", async () => {
        const { partitions } = await queue.layout();
        const node = nodeIn(3, partitions);
        expect(await commit(ctx.store, node, 0, ["+CUSTOM_X"])).to.equal(true);
        expect(await commit(ctx.store, node, 0, ["+CUSTOM_LOST"])).to.equal(false);
        expect(await commit(ctx.store, node, 1, ["-CUSTOM_X", "+CUSTOM_Z"])).to.equal(true);
        const read = await queue.read(3, null, 100, null);
        expect(
          read.entries.map(({ node: n, deltas, generation }) => ({ n, deltas, generation })),
        ).to.deep.equal([
          { n: node, deltas: ["+CUSTOM_X"], generation: 1 },
          { n: node, deltas: ["-CUSTOM_X", "+CUSTOM_Z"], generation: 2 },
        ]);
        expect((await queue.stats(10, 1000)).pendingChanges).to.equal(3);
        // Read on from the first: the second only.
        expect(
          (await queue.read(3, read.entries[0]!.id, 100, null)).entries.map((e) => e.generation),
        ).to.deep.equal([2]);
      });

      it("takes a delivered change off once: a second owner's settle of it counts nothing", async () => {
        const { partitions } = await queue.layout();
        const node = nodeIn(5, partitions);
        await commit(ctx.store, node, 0, ["+CUSTOM_A", "+CUSTOM_B"]);
        const [entry] = (await queue.read(5, null, 10, null)).entries;
        expect((await queue.settle(5, entry!, { kind: "delivered" })).settled).to.equal(true);
        expect((await queue.settle(5, entry!, { kind: "delivered" })).settled).to.equal(false);
        const stats = await queue.stats(10, 1000);
        expect(stats).to.include({ pendingChanges: 0, delivered: 1, queuedEntries: 0, oldestPendingMs: 0 });
        expect((await queue.read(5, null, 10, null)).entries).to.deep.equal([]);
      });

      it("keeps what it gives up, newest first, and counts it", async () => {
        const { partitions } = await queue.layout();
        const [a, b] = [nodeIn(1, partitions), nodeIn(1, partitions)];
        await commit(ctx.store, a, 0, ["+CUSTOM_A"]);
        await commit(ctx.store, b, 0, ["-CUSTOM_B"]);
        const entries = (await queue.read(1, null, 10, null)).entries;
        for (const entry of entries)
          await queue.settle(1, entry, { kind: "given_up", reason: `gone ${entry.node}` });
        const stats = await queue.stats(10, 1000);
        expect(stats).to.include({ pendingChanges: 0, given_up: 2, delivered: 0 });
        expect(
          stats.undeliverable.map(({ node, deltas, reason }) => ({ node, deltas, reason })),
        ).to.deep.equal([
          { node: b, deltas: ["-CUSTOM_B"], reason: `gone ${b}` },
          { node: a, deltas: ["+CUSTOM_A"], reason: `gone ${a}` },
        ]);
        expect(Math.abs(stats.undeliverable[0]!.atMs - Date.now())).to.be.below(5000);
      });

      it("ages the oldest pending change by the store's clock", async () => {
        const { partitions } = await queue.layout();
        await commit(ctx.store, nodeIn(0, partitions), 0, ["+CUSTOM_OLD"]);
        await new Promise((r) => setTimeout(r, 120));
        await commit(ctx.store, nodeIn(7, partitions), 0, ["+CUSTOM_NEW"]);
        const { oldestPendingMs, queuedEntries } = await queue.stats(10, 1000);
        expect(queuedEntries).to.equal(2);
        expect(oldestPendingMs).to.be.within(100, 5000);
      });

      it("counts the delivery workers heard from within the window; one leaving is counted out", async () => {
        expect(await queue.heartbeat("bridge-a", 1000)).to.equal(1);
        expect(await queue.heartbeat("bridge-b", 1000)).to.equal(2);
        expect(await queue.heartbeat("bridge-a", 1000)).to.equal(2);
        expect(await queue.heartbeat("bridge-b", 1000, true)).to.equal(1);
        await new Promise((r) => setTimeout(r, 80));
        // bridge-a was last heard over 50 ms ago: out of a 50 ms window, only bridge-c counts.
        expect(await queue.heartbeat("bridge-c", 50)).to.equal(1);
        expect((await queue.stats(1, 1000)).liveWorkers).to.equal(2);
      });
    });

    describe("past its bound", () => {
      // 16 entries over 16 partitions: one queued entry per partition, then changes fold.
      const ctx = useBackend(backend, { ironicQueueMax: 16 });

      it("folds a node's further changes, the last sign of each trait winning, and loses none", async () => {
        const queue = ctx.store.traits.ironicQueue;
        const { partitions, partitionBound } = await queue.layout();
        expect(partitionBound).to.equal(1);
        const [a, b] = [nodeIn(2, partitions), nodeIn(2, partitions)];
        await commit(ctx.store, a, 0, ["+CUSTOM_X"]); // queued: the partition's one entry
        await commit(ctx.store, a, 1, ["-CUSTOM_X", "+CUSTOM_Y"]); // folded
        await commit(ctx.store, a, 2, ["+CUSTOM_X"]); // folded: X's last sign is + again
        await commit(ctx.store, b, 0, ["-CUSTOM_Q"]); // folded: the partition is full
        let stats = await queue.stats(10, 1000);
        expect(stats).to.include({ queuedEntries: 1, mergedNodes: 2, coalesced: 4, pendingChanges: 4 });

        // Not at the stream's end: no folded record yet (it must come after a's queued entry).
        expect((await queue.read(2, null, 1, "0")).merged).to.deep.equal([]);
        const read = await queue.read(2, null, 10, "0");
        expect(read.entries.map((e) => e.deltas)).to.deep.equal([["+CUSTOM_X"]]);
        const folded = new Map(read.merged.map((m) => [m.node, m]));
        expect(folded.get(a)!.deltas.sort()).to.deep.equal(["+CUSTOM_X", "+CUSTOM_Y"]);
        expect(folded.get(b)!.deltas).to.deep.equal(["-CUSTOM_Q"]);
        expect(read.mergedCursor).to.equal("0"); // one step scanned them all

        // a's queued entry delivered: the stream has room, yet a's next change still folds
        // (after its record), while a fresh node queues.
        await queue.settle(2, read.entries[0]!, { kind: "delivered" });
        await commit(ctx.store, a, 3, ["-CUSTOM_Y"]);
        const c = nodeIn(2, partitions);
        await commit(ctx.store, c, 0, ["+CUSTOM_C"]);
        stats = await queue.stats(10, 1000);
        expect(stats).to.include({ queuedEntries: 1, mergedNodes: 2, coalesced: 5 });

        // The record read before that change is stale: settling it is refused, nothing lost.
        expect((await queue.settle(2, folded.get(a)!, { kind: "delivered" })).settled).to.equal(false);
        const again = await queue.read(2, null, 10, "0");
        const current = again.merged.find((m) => m.node === a) as MergedChange;
        expect(current.deltas.sort()).to.deep.equal(["+CUSTOM_X", "-CUSTOM_Y"]);
        expect((await queue.settle(2, current, { kind: "delivered" })).settled).to.equal(true);
        expect((await queue.settle(2, folded.get(b)!, { kind: "delivered" })).settled).to.equal(true);
        stats = await queue.stats(10, 1000);
        // What is left: c's queued change.
        expect(stats).to.include({ mergedNodes: 0, queuedEntries: 1, pendingChanges: 1 });
        // With its record delivered, a queues again.
        await queue.settle(2, again.entries[0]!, { kind: "delivered" });
        await commit(ctx.store, a, 4, ["+CUSTOM_Z"]);
        expect((await queue.read(2, null, 10, null)).entries.map((e) => [e.node, e.deltas])).to.deep.equal([
          [a, ["+CUSTOM_Z"]],
        ]);
      });
    });
  });
}
