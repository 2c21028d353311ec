import { expect } from "chai";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { processClockUs } from "../../src/core/lease/clock.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import { openStore } from "../../src/store/open.js";
import { Store } from "../../src/store/store.js";
import { MemoryTraits } from "../../src/store/memory/traits.js";
import { OwnershipRegistry } from "../../src/core/traits/ownership.js";
import { TraitService } from "../../src/bridge/trait-service.js";
import { TestRedisServer } from "../helpers/redis-server.js";

const BOUND = 10;
const N1 = "11111111-1111-4111-8111-111111111111";
const N2 = "22222222-2222-4222-8222-222222222222";

/**
 * A shard's trait feed keeps a bounded number of entries. An agent whose cursor falls
 * behind the oldest kept one gets a resync (every node of the shard with its current
 * traits, and the entry to resume after), never entries with a silent gap before them.
 */
for (const kind of ["memory", "redis"] as const) {
  describe(`Trait feed past its bound: ${kind}`, function () {
    this.timeout(30_000);
    let server: TestRedisServer | undefined;
    let store: Store;
    let traits: TraitService;

    before(async () => {
      if (kind === "redis") server = await TestRedisServer.start();
    });
    after(async () => server?.stop());
    beforeEach(async () => {
      if (server !== undefined) {
        const admin = server.client();
        await admin.flushall();
        admin.disconnect();
      }
      store =
        kind === "memory"
          ? new Store(new MemoryLeases(processClockUs, 0), new MemoryNodes(), new MemoryTraits(BOUND))
          : await openStore(server!.url, { feedMaxEntries: BOUND });
      traits = new TraitService(store.traits, store.nodes, new OwnershipRegistry());
      for (const uuid of [N1, N2])
        await store.nodes.put(uuid, { shard: "rack", name: null, conductor_group: "", instance_host: null });
    });
    afterEach(async () => store.close());

    const change = (node: string, sign: "+" | "-", trait: string) =>
      traits.applyExplicit(node, "operator", undefined, [{ sign, trait }]);

    it("reads entries while it keeps up; fallen behind, a resync with the shard's current traits, then entries again", async () => {
      await change(N1, "+", "CUSTOM_FIRST");
      const first = await traits.readFeed("rack", 100);
      expect(first.resync).to.equal(undefined);
      expect(first.entries.map((e) => e.deltas)).to.deep.equal([["+CUSTOM_FIRST"]]);
      await store.traits.ack("rack", first.entries[0]!.id);

      // Far more changes than the feed keeps, while the agent is away.
      for (let i = 0; i < 600; i++)
        await change(i % 2 === 0 ? N1 : N2, i % 3 === 0 ? "-" : "+", `CUSTOM_T${i % 7}`);
      const behind = await traits.readFeed("rack", 100);
      expect(behind.entries, "no entries with a gap before them").to.deep.equal([]);
      expect(behind.resync, "a resync").to.not.equal(undefined);
      const current = async (uuid: string) => Object.keys((await store.traits.read(uuid)).holders).sort();
      expect(behind.resync!.nodes).to.deep.equal([
        { node: N1, traits: await current(N1), generation: (await store.traits.read(N1)).generation },
        { node: N2, traits: await current(N2), generation: (await store.traits.read(N2)).generation },
      ]);
      expect(await current(N1)).to.include("CUSTOM_FIRST");

      // Resumed after the snapshot's entry: entries flow again, the next change among them.
      expect(await store.traits.ack("rack", behind.resync!.resume_after!)).to.equal(
        behind.resync!.resume_after,
      );
      expect((await traits.readFeed("rack", 100)).resync).to.equal(undefined);
      await change(N2, "+", "CUSTOM_AFTER");
      const after = await traits.readFeed("rack", 100);
      expect(after.resync).to.equal(undefined);
      expect(after.entries.map((e) => e.deltas)).to.deep.equal([["+CUSTOM_AFTER"]]);
    });

    it("a first reader (nothing acknowledged yet) of a feed that was trimmed resyncs too", async () => {
      for (let i = 0; i < 600; i++) await change(N1, i % 2 === 0 ? "+" : "-", "CUSTOM_FLIP");
      const read = await traits.readFeed("rack", 100);
      expect(read.resync?.nodes.map((n) => n.node)).to.deep.equal([N1, N2]);
      expect(read.resync!.nodes[0]!.traits).to.deep.equal([]);
    });
  });
}
