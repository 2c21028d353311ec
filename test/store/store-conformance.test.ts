import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { HostTwinError } from "../../src/core/names.js";
import { ValidationError } from "../../src/core/validation.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { Store } from "../../src/store/store.js";
import { backendsUnderTest, redisClusterUnderTest, storeNowMs, useBackend } from "../helpers/backends.js";

/** Expect `promise` to fail validation naming exactly `field`. */
async function expectInvalid(promise: Promise<unknown>, field: string): Promise<ValidationError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    const fields = (error as ValidationError).issues.map((i) => i.field);
    expect(fields, (error as Error).message).to.include(field);
    return error as ValidationError;
  }
  throw new Error(`expected a validation error on ${field}`);
}

/** What `promise` was rejected with (it must be). */
async function refusal(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: Error) => error,
  );
}

// On a real Redis Cluster too: every script must touch one slot, every scan each master.
for (const backend of [...backendsUnderTest(), redisClusterUnderTest()]) {
  describe(`Store conformance: ${backend.name}`, function () {
    const ctx = useBackend(backend);
    let store: Store;
    beforeEach(() => {
      store = ctx.store;
    });

    describe("acquire", () => {
      it("grants a free lease with a new token and the full ttl", async () => {
        const got = await store.acquire({ shard: "s1", agent: "a", ttlMs: 6000 });
        expect(got).to.include({ ok: true, holder: "a" });
        if (!got.ok) throw new Error("unreachable");
        expect(got.token).to.be.a("number").greaterThan(0);
        expect(got.ttlMs).to.be.within(5000, 6000);
      });

      it("defaults the ttl to 6 s", async () => {
        const got = await store.acquire({ shard: "s1", agent: "a" });
        expect(got.ok && got.ttlMs).to.be.within(5000, 6000);
      });

      it("refuses another agent and names the holder and its time left", async () => {
        const first = await store.acquire({ shard: "s1", agent: "a", ttlMs: 6000 });
        const second = await store.acquire({ shard: "s1", agent: "b", ttlMs: 6000 });
        expect(second.ok).to.equal(false);
        if (second.ok || !first.ok) throw new Error("unreachable");
        expect(second.reason).to.equal("held");
        expect(second.current).to.include({ holder: "a", token: first.token });
        expect(second.current!.ttlMs).to.be.within(5000, 6000);
      });

      it("re-acquiring one's own renewed lease starts a new lease: new token, the old one fenced out", async () => {
        const first = await store.acquire({ shard: "s1", agent: "a", ttlMs: 2000 });
        if (!first.ok) throw new Error("acquire refused");
        expect(await store.renew({ shard: "s1", agent: "a", token: first.token, ttlMs: 2000 })).to.include({
          ok: true,
        });
        const again = await store.acquire({ shard: "s1", agent: "a", ttlMs: 9000 });
        if (!again.ok) throw new Error("acquire refused");
        expect(again.token).to.be.greaterThan(first.token);
        expect(again.ttlMs).to.be.within(8000, 9000);
        expect(await store.fence({ shard: "s1", token: first.token })).to.include({
          allowed: false,
          reason: "stale_token",
        });
        expect(await store.renew({ shard: "s1", agent: "a", token: first.token })).to.include({
          ok: false,
          reason: "stale_token",
        });
        expect(await store.release({ shard: "s1", agent: "a", token: first.token })).to.include({
          ok: false,
          reason: "stale_token",
        });
        expect(await store.fence({ shard: "s1", token: again.token })).to.include({ allowed: true });
      });

      it("refuses its holder a new lease over one it never renewed (it may not have heard the grant)", async () => {
        const first = await store.acquire({ shard: "s1", agent: "a", ttlMs: 1000 });
        if (!first.ok) throw new Error("acquire refused");
        // An agent that can send but not hear asks again and again: it must not keep the shard.
        const again = await store.acquire({ shard: "s1", agent: "a", ttlMs: 1000 });
        expect(again).to.deep.include({ ok: false, reason: "held" });
        expect(again.ok === false && again.current).to.include({ holder: "a", token: first.token });
        expect(await store.fence({ shard: "s1", token: first.token })).to.include({ allowed: true });
        await sleep(1100);
        const other = await store.acquire({ shard: "s1", agent: "b", ttlMs: 1000 });
        expect(other).to.include({ ok: true, holder: "b" });
      });

      it("keeps shards independent", async () => {
        await store.acquire({ shard: "s1", agent: "a" });
        const other = await store.acquire({ shard: "s2", agent: "b" });
        expect(other).to.include({ ok: true, holder: "b" });
      });
    });

    describe("renew", () => {
      it("extends the holder's lease under its token", async () => {
        const got = await store.acquire({ shard: "s1", agent: "a", ttlMs: 3000 });
        if (!got.ok) throw new Error("acquire failed");
        const renewed = await store.renew({ shard: "s1", agent: "a", token: got.token, ttlMs: 10_000 });
        expect(renewed).to.include({ ok: true, holder: "a", token: got.token });
        expect(renewed.ok && renewed.ttlMs).to.be.within(9000, 10_000);
      });

      it("refuses another agent, a stale token, and a free shard", async () => {
        const got = await store.acquire({ shard: "s1", agent: "a" });
        if (!got.ok) throw new Error("acquire failed");
        expect(await store.renew({ shard: "s1", agent: "b", token: got.token })).to.include({
          ok: false,
          reason: "held",
        });
        expect(await store.renew({ shard: "s1", agent: "a", token: got.token - 1 })).to.include({
          ok: false,
          reason: "stale_token",
        });
        expect(await store.renew({ shard: "s9", agent: "a", token: got.token })).to.include({
          ok: false,
          reason: "expired",
        });
      });

      it("never revives an expired lease; re-acquiring mints a new token", async function () {
        this.timeout(5000);
        const got = await store.acquire({ shard: "s1", agent: "a", ttlMs: 1000 });
        if (!got.ok) throw new Error("acquire failed");
        await sleep(1100);
        expect(await store.renew({ shard: "s1", agent: "a", token: got.token })).to.include({
          ok: false,
          reason: "expired",
        });
        expect(await store.fence({ shard: "s1", token: got.token })).to.include({
          allowed: false,
          reason: "expired",
        });
        const again = await store.acquire({ shard: "s1", agent: "a" });
        expect(again).to.include({ ok: true });
        expect(again.ok && again.token).to.be.greaterThan(got.token);
      });
    });

    describe("release", () => {
      it("hands over at once: a standby acquires right after, with a higher token", async () => {
        const a = await store.acquire({ shard: "s1", agent: "a" });
        if (!a.ok) throw new Error("acquire failed");
        expect(await store.release({ shard: "s1", agent: "a", token: a.token })).to.include({ ok: true });
        const b = await store.acquire({ shard: "s1", agent: "b" });
        expect(b).to.include({ ok: true, holder: "b" });
        expect(b.ok && b.token).to.be.greaterThan(a.token);
        expect(await store.fence({ shard: "s1", token: a.token })).to.include({
          allowed: false,
          reason: "stale_token",
        });
      });

      it("is idempotent, and refuses a non-holder without touching the lease", async () => {
        const a = await store.acquire({ shard: "s1", agent: "a" });
        if (!a.ok) throw new Error("acquire failed");
        expect(await store.release({ shard: "s1", agent: "b", token: a.token })).to.include({
          ok: false,
          reason: "held",
        });
        expect(await store.release({ shard: "s1", agent: "a", token: a.token + 1 })).to.include({
          ok: false,
          reason: "stale_token",
        });
        expect((await store.read("s1")).current).to.include({ holder: "a", token: a.token });
        expect(await store.release({ shard: "s1", agent: "a", token: a.token })).to.include({ ok: true });
        expect(await store.release({ shard: "s1", agent: "a", token: a.token })).to.include({ ok: true });
        expect((await store.read("s1")).current).to.equal(null);
      });
    });

    describe("fence", () => {
      it("allows only the live holder's current token", async () => {
        const a = await store.acquire({ shard: "s1", agent: "a" });
        if (!a.ok) throw new Error("acquire failed");
        const allowed = await store.fence({ shard: "s1", token: a.token });
        expect(allowed).to.include({ allowed: true });
        expect(allowed.current).to.include({ holder: "a", token: a.token });
        expect(await store.fence({ shard: "s1", token: a.token + 1 })).to.include({
          allowed: false,
          reason: "stale_token",
        });
        expect(await store.fence({ shard: "other", token: a.token })).to.include({
          allowed: false,
          reason: "expired",
        });
      });
    });

    describe("tokens", () => {
      it("strictly increase over many handovers", async () => {
        let last = 0;
        for (let i = 0; i < 50; i++) {
          const agent = `agent-${i % 3}`;
          const got = await store.acquire({ shard: "s1", agent });
          if (!got.ok) throw new Error("acquire failed");
          expect(got.token).to.be.greaterThan(last);
          last = got.token;
          await store.release({ shard: "s1", agent, token: got.token });
        }
        expect((await store.read("s1")).lastToken).to.equal(last);
      });

      it("keep increasing after the store lost every key", async () => {
        const before = await store.acquire({ shard: "s1", agent: "a" });
        if (!before.ok) throw new Error("acquire failed");
        const wiped = await backend.loseEverything(store);
        expect((await wiped.read("s1")).lastToken).to.equal(0);
        const after = await wiped.acquire({ shard: "s1", agent: "b" });
        expect(after.ok && after.token).to.be.greaterThan(before.token);
      });
    });

    describe("read", () => {
      it("shows the live lease and the highest token, and stores nothing for an unknown shard", async () => {
        expect(await store.read("nobody")).to.include({ current: null, lastToken: 0 });
        expect(await backend.storedKeys(store)).to.equal(0);
        const a = await store.acquire({ shard: "s1", agent: "a", ttlMs: 4000 });
        const seen = await store.read("s1");
        expect(seen.current).to.include({ holder: "a", token: a.ok && a.token });
        expect(seen.lastToken).to.equal(a.ok && a.token);
      });
    });

    describe("forgetting a shard", () => {
      it("drops a free shard from the listings, keeps its token floor, and refuses while it is held", async () => {
        const a = await store.acquire({ shard: "s1", agent: "a", ttlMs: 4000 });
        expect(await store.forgetShard("s1")).to.deep.include({ kind: "held" });
        await store.release({ shard: "s1", agent: "a", token: a.ok ? a.token : 0 });
        expect(await store.forgetShard("s1")).to.deep.equal({ kind: "forgotten" });
        expect(await store.leasedShards()).to.not.include("s1");
        expect(await store.isListed("s1")).to.equal(false);
        expect(await store.forgetShard("s1")).to.deep.equal({ kind: "unknown" });
        const b = await store.acquire({ shard: "s1", agent: "b", ttlMs: 4000 });
        expect(b.ok && a.ok && b.token > a.token).to.equal(true);
        expect(await store.leasedShards()).to.include("s1");
      });

      it("keeps a shard listed when a grant lands between the forgetting's first read and its unlisting", async () => {
        const a = await store.acquire({ shard: "s1", agent: "a", ttlMs: 4000 });
        await store.release({ shard: "s1", agent: "a", token: a.ok ? a.token : 0 });
        // The same backend, with a grant made just before the unlisting: the race forgetShard guards.
        const racing = Object.create(store.backend, {
          unlist: {
            value: async (shard: string) => {
              await store.acquire({ shard, agent: "racer", ttlMs: 4000 });
              return store.backend.unlist(shard);
            },
          },
        }) as typeof store.backend;
        const raced = new Store(racing, new MemoryNodes(), store.traits);
        const outcome = await raced.forgetShard("s1");
        expect(outcome.kind).to.equal("held");
        expect(outcome.kind === "held" && outcome.current.holder).to.equal("racer");
        expect(await store.leasedShards()).to.include("s1");
      });
    });

    describe("trait records", () => {
      it("reads many in one call, in the order asked, an unknown node's as empty", async () => {
        const [a, b] = ["7b0e1d2c-b4a5-4697-8877-66554433aa01", "7b0e1d2c-b4a5-4697-8877-66554433aa02"];
        const next = { holders: { CUSTOM_X: "inspector" }, generation: 1, lastOrder: { inspector: 1 } };
        expect(await store.traits.commit(b, 0, next)).to.equal(true);
        expect(await store.traits.readMany([b, a, b])).to.deep.equal([
          next,
          { holders: {}, generation: 0, lastOrder: {} },
          next,
        ]);
        expect(await store.traits.readMany([])).to.deep.equal([]);
      });
    });

    describe("shard definitions", () => {
      const everything = { mark: null, version: -1 };
      const records = (entries: Map<string, { record: string | null }>) =>
        [...entries].map(([name, e]) => [name, e.record]).sort();

      it("stores, lists and removes records by shard, the version rising with every write", async () => {
        const versions = [(await store.definitions.read(everything)).version];
        const write = async (name: string, record: string | null) => {
          const written = await store.definitions.write(name, name.toLowerCase(), record);
          if ("caseTwin" in written) throw new Error(`refused: ${written.caseTwin}`);
          versions.push(written.version);
          return written.existed;
        };
        expect(await write("rack-a", '{"lease_ttl_ms":9000}')).to.equal(false);
        expect(await write("rack-a", '{"lease_ttl_ms":8000}')).to.equal(true);
        expect(await write("rack-b", "{}")).to.equal(false);
        const listed = await store.definitions.read(everything);
        expect(listed).to.include({ version: versions[3], whole: true });
        expect(records(listed.entries)).to.deep.equal([
          ["rack-a", '{"lease_ttl_ms":8000}'],
          ["rack-b", "{}"],
        ]);
        expect(listed.entries.get("rack-a")!.version).to.equal(versions[2]);
        expect(await write("rack-a", null)).to.equal(true);
        expect(await write("rack-a", null)).to.equal(false);
        // A removed shard keeps its entry, without a record, at its removal's version.
        const after = await store.definitions.read(everything);
        expect(records(after.entries)).to.deep.equal([
          ["rack-a", null],
          ["rack-b", "{}"],
        ]);
        expect(after.entries.get("rack-a")!.version).to.equal(versions[5]);
        expect(after.version).to.equal(versions[5]);
        for (let i = 1; i < versions.length; i++) expect(versions[i]).to.be.greaterThan(versions[i - 1]!);
      });

      it("refuses a record whose name equals another's but for case, writing nothing, even two sent at once", async () => {
        const twins = ["rack-x", "RACK-X", "Rack-X", "rack-X"];
        // Sent together: on Redis they interleave with each other's round trips; one is written.
        const outcomes = await Promise.all(
          twins.map((name) => store.definitions.write(name, name.toLowerCase(), `{"description":"${name}"}`)),
        );
        const written = twins.filter((_, i) => !("caseTwin" in outcomes[i]!));
        expect(written, "one spelling written").to.have.length(1);
        for (const outcome of outcomes)
          if ("caseTwin" in outcome) expect(outcome.caseTwin).to.equal(written[0]);
        const before = await backend.state(store);
        const again = await store.definitions.write("RaCk-x", "rack-x", "{}");
        expect(again).to.deep.equal({ caseTwin: written[0] });
        expect(await backend.state(store), "a refusal writes nothing").to.equal(before);
        const live = records((await store.definitions.read(everything)).entries).filter(
          ([, r]) => r !== null,
        );
        expect(live.map(([name]) => name)).to.deep.equal(written);
        // The same name is replaced as before; once it is removed, another spelling may be defined.
        expect(await store.definitions.write(written[0]!, "rack-x", "{}")).to.include({ existed: true });
        expect(await store.definitions.write(written[0]!, "rack-x", null)).to.include({ existed: true });
        expect(await store.definitions.write("RACK-x", "rack-x", "{}")).to.include({ existed: false });
      });

      it("reads only what changed since a version; a store that lost its data answers everything under a new mark", async () => {
        await store.definitions.write("rack-a", "rack-a", "{}");
        await store.definitions.write("rack-b", "rack-b", "{}");
        const first = await store.definitions.read(everything);
        const seen = { mark: first.mark, version: first.version };
        expect((await store.definitions.read(seen)).entries.size).to.equal(0);
        await store.definitions.write("rack-c", "rack-c", '{"lease_ttl_ms":3000}');
        await store.definitions.write("rack-a", "rack-a", null);
        const changed = await store.definitions.read(seen);
        expect(changed.whole).to.equal(false);
        expect(records(changed.entries)).to.deep.equal([
          ["rack-a", null],
          ["rack-c", '{"lease_ttl_ms":3000}'],
        ]);
        const now = { mark: changed.mark, version: changed.version };
        // A version above the store's (its replica missed writes) answers everything.
        const ahead = await store.definitions.read({ ...now, version: now.version + 1 });
        expect(ahead.whole).to.equal(true);
        expect(ahead.entries.size).to.equal(3);

        const emptied = await backend.loseEverything(store);
        const before = await backend.state(emptied);
        const lost = await emptied.definitions.read(now);
        expect(lost).to.include({ whole: true, version: 0 });
        expect(lost.mark).to.not.equal(now.mark);
        expect(lost.entries.size).to.equal(0);
        expect(await backend.state(emptied), "a read writes nothing").to.equal(before);
        // Its next reader is told nothing changed; its next write leaves a new mark.
        const again = await emptied.definitions.read({ mark: lost.mark, version: 0 });
        expect(again).to.include({ whole: false, mark: lost.mark });
        await emptied.definitions.write("rack-d", "rack-d", "{}");
        const written = await emptied.definitions.read({ mark: lost.mark, version: 0 });
        expect(written.mark).to.be.a("string").and.not.equal(now.mark);
      });

      it("restores no record whose name is a live one's but for case: the store's spelling stays, nothing else written", async () => {
        await store.definitions.write("rack-y", "rack-y", '{"description":"kept"}');
        const copy = (await store.definitions.read(everything)).entries;
        const emptied = await backend.loseEverything(store);
        // Written after the loss in another case, then a copy of before comes back.
        expect(await emptied.definitions.write("RACK-Y", "rack-y", "{}")).to.include({ existed: false });
        expect(await emptied.definitions.restore(copy)).to.deep.equal({ restored: 0 });
        const live = records((await emptied.definitions.read(everything)).entries).filter(
          ([, r]) => r !== null,
        );
        expect(live).to.deep.equal([["RACK-Y", "{}"]]);
        // And the index still knows the live spelling: the copy's is refused as a write too.
        expect(await emptied.definitions.write("rack-y", "rack-y", "{}")).to.deep.equal({
          caseTwin: "RACK-Y",
        });
      });

      it("restores a kept copy: the newest entry of each shard wins in any order, a newer removal or write stays", async () => {
        await store.definitions.write("rack-a", "rack-a", '{"description":"old"}');
        await store.definitions.write("rack-b", "rack-b", "{}");
        const older = (await store.definitions.read(everything)).entries;
        await store.definitions.write("rack-a", "rack-a", '{"description":"new"}');
        await store.definitions.write("rack-b", "rack-b", null);
        await store.definitions.write("rack-c", "rack-c", "{}");
        const newer = (await store.definitions.read(everything)).entries;

        let emptied = await backend.loseEverything(store);
        expect(await emptied.definitions.restore(newer)).to.deep.equal({ restored: 3 });
        expect(await emptied.definitions.restore(older)).to.deep.equal({ restored: 0 });
        const expected = records(newer);
        expect(records((await emptied.definitions.read(everything)).entries)).to.deep.equal(expected);

        emptied = await backend.loseEverything(emptied);
        expect(await emptied.definitions.restore(older)).to.deep.equal({ restored: 2 });
        expect(await emptied.definitions.restore(newer)).to.deep.equal({ restored: 3 });
        const restored = await emptied.definitions.read(everything);
        expect(records(restored.entries)).to.deep.equal(expected);
        expect(restored.version).to.equal(Math.max(...[...newer.values()].map((e) => e.version)));

        // Written after the loss: newer than any copy taken before it, so no copy undoes it.
        emptied = await backend.loseEverything(emptied);
        await emptied.definitions.write("rack-b", "rack-b", '{"description":"again"}');
        expect(await emptied.definitions.restore(newer)).to.deep.equal({ restored: 2 });
        expect((await emptied.definitions.read(everything)).entries.get("rack-b")!.record).to.equal(
          '{"description":"again"}',
        );
      });
    });

    describe("the node registry's mark", () => {
      it("is left by the first upsert and kept; a store that lost its data has none until its next upsert leaves a new one", async () => {
        const node = (uuid: string) => ({
          uuid,
          name: null,
          shard: null,
          conductor_group: "",
          instance_host: null,
        });
        expect(await store.nodes.backend.mark()).to.equal(null);
        await store.nodes.backend.upsert([node("7b0e1d2c-b4a5-4697-8877-66554433bb01")]);
        const first = await store.nodes.backend.mark();
        expect(first).to.be.a("string");
        await store.nodes.backend.upsert([node("7b0e1d2c-b4a5-4697-8877-66554433bb02")]);
        expect(await store.nodes.backend.mark()).to.equal(first);
        const emptied = await backend.loseEverything(store);
        expect(await emptied.nodes.backend.mark()).to.equal(null);
        await emptied.nodes.backend.upsert([node("7b0e1d2c-b4a5-4697-8877-66554433bb01")]);
        expect(await emptied.nodes.backend.mark())
          .to.be.a("string")
          .and.not.equal(first);
      });
    });

    describe("agent liveness", () => {
      it("records heartbeats by store time and lists agents with their age", async () => {
        // Between two readings of the store's clock, not near this process's wall clock
        // (storeNowMs; in the CI run that failed, the embedded store was 5,870 ms from it).
        const before = await storeNowMs(store);
        const first = await store.heartbeat("compute-b");
        await sleep(30);
        const second = await store.heartbeat("compute-a");
        const seen = await store.agents();
        const after = await storeNowMs(store);
        expect(seen.map((s) => s.agent)).to.deep.equal(["compute-a", "compute-b"]);
        const b = seen.find((s) => s.agent === "compute-b")!;
        expect(b.lastSeenMs).to.equal(first.lastSeenMs);
        expect(b.lastSeenMs, "compute-b seen by the store's clock").to.be.within(before, after);
        // Seen the sleep before compute-a (less the timer's and the rounding's slack)...
        expect(second.lastSeenMs - b.lastSeenMs).to.be.at.least(25);
        // ...and aged by the store's clock at the listing, which came after compute-a's heartbeat.
        expect(b.ageMs).to.be.within(second.lastSeenMs - b.lastSeenMs, after - b.lastSeenMs);
        expect(b.serves).to.deep.equal([]);
      });

      it("keeps the shards each agent last said it serves (none: the legacy ring pool)", async () => {
        await store.heartbeat("compute-a", ["rack-b", "rack-a", "rack-a"]);
        await store.heartbeat("compute-b", ["rack-c"]);
        await store.heartbeat("compute-b");
        const seen = await store.agents();
        expect(seen.map((s) => [s.agent, s.serves])).to.deep.equal([
          ["compute-a", ["rack-a", "rack-b"]],
          ["compute-b", []],
        ]);
        await expectInvalid(store.heartbeat("compute-c", ["no,comma"]), "shards[0]");
      });

      it("adds up what the instances of one agent declare, each its last, while each is heard within the window", async () => {
        const beat = async (instance: string | undefined, shards: string[], windowMs = 60_000) =>
          (await store.heartbeat("compute-a", shards, { instance, windowMs })).serves;
        // An `agent` and a `run` of one id, heartbeating their own shards in turns: no flip.
        expect(await beat("agent-1", ["rack-a"])).to.deep.equal(["rack-a"]);
        expect(await beat("run-1", ["rack-b"])).to.deep.equal(["rack-a", "rack-b"]);
        for (let i = 0; i < 3; i++) {
          expect(await beat("agent-1", ["rack-a"])).to.deep.equal(["rack-a", "rack-b"]);
          expect((await store.agent("compute-a"))!.serves).to.deep.equal(["rack-a", "rack-b"]);
          expect(await beat("run-1", ["rack-b"])).to.deep.equal(["rack-a", "rack-b"]);
          expect((await store.agents())[0]!.serves).to.deep.equal(["rack-a", "rack-b"]);
        }
        // Each instance's own last word replaces its earlier one at once.
        expect(await beat("run-1", [])).to.deep.equal(["rack-a"]);
        expect(await beat("run-1", ["rack-c"])).to.deep.equal(["rack-a", "rack-c"]);
        // One not heard within the window no longer counts (run-1 last spoke ~60 ms ago).
        await sleep(60);
        expect(await beat("agent-1", ["rack-a"], 30)).to.deep.equal(["rack-a"]);
        // A sender that names no instance is one more instance ("" ), as senders were before.
        expect(await beat(undefined, ["rack-d"])).to.deep.equal(["rack-a", "rack-d"]);
        expect(await beat(undefined, [])).to.deep.equal(["rack-a"]);
        await expectInvalid(store.heartbeat("compute-a", [], { instance: "has space" }), "instance");
        // Forgotten, the agent starts afresh: its instances' declarations go with it.
        expect(await store.forgetAgent("compute-a")).to.equal(true);
        expect(await beat("run-2", ["rack-e"])).to.deep.equal(["rack-e"]);
      });

      it("refuses a heartbeat of an id equal to a recorded agent's but for case (one host to nova), writing nothing, until that one is forgotten", async () => {
        await store.heartbeat("compute-a", ["rack-a"]);
        const twin = await refusal(store.heartbeat("Compute-A"));
        expect(twin).to.be.instanceOf(HostTwinError);
        expect(twin.message).to.match(
          /^agent Compute-A is one host to nova with registered agent compute-a /,
        );
        expect((await store.agents()).map((s) => s.agent)).to.deep.equal(["compute-a"]);
        await store.heartbeat("compute-a");
        expect(await store.forgetAgent("compute-a")).to.equal(true);
        await store.heartbeat("Compute-A", ["rack-a"]);
        expect((await store.agents()).map((s) => s.agent)).to.deep.equal(["Compute-A"]);
        expect(await refusal(store.heartbeat("compute-a"))).to.be.instanceOf(HostTwinError);
      });

      it("forgets an agent's record whole: gone from the list and from lookups, the next heartbeat makes it anew", async () => {
        await store.heartbeat("compute-a", ["rack-a"]);
        await store.heartbeat("compute-b");
        expect(await store.forgetAgent("compute-a")).to.equal(true);
        expect(await store.agent("compute-a")).to.equal(null);
        expect((await store.agents()).map((s) => s.agent)).to.deep.equal(["compute-b"]);
        expect(await store.forgetAgent("compute-a")).to.equal(false);
        await store.heartbeat("compute-a");
        expect((await store.agent("compute-a"))!.serves).to.deep.equal([]);
      });
    });

    describe("bad input", () => {
      const badShards = ["", "has space", "brace{x}", "ünïcode", "a/b", "x".repeat(256)];
      for (const shard of badShards) {
        it(`refuses shard ${JSON.stringify(shard.length > 20 ? `${shard.slice(0, 8)}…(${shard.length})` : shard)} and stores nothing`, async () => {
          await expectInvalid(store.acquire({ shard, agent: "a" }), "shard");
          expect(await backend.storedKeys(store)).to.equal(0);
        });
      }

      it("accepts the longest legal shard name", async () => {
        expect(await store.acquire({ shard: "S".repeat(255), agent: "a" })).to.include({ ok: true });
      });

      for (const agent of ["", "x".repeat(256), "tab\there"]) {
        it(`refuses agent id of length ${agent.length}${agent.includes("\t") ? " with a control character" : ""}`, async () => {
          await expectInvalid(store.acquire({ shard: "s1", agent }), "agent");
          await expectInvalid(store.heartbeat(agent), "agent");
          expect(await backend.storedKeys(store)).to.equal(0);
        });
      }

      for (const ttlMs of [999, 300_001, 1500.5, 0, -1]) {
        it(`refuses ttlMs ${ttlMs}`, async () => {
          const error = await expectInvalid(store.acquire({ shard: "s1", agent: "a", ttlMs }), "ttlMs");
          expect(error.message).to.match(/ttlMs: must be/);
          expect(await backend.storedKeys(store)).to.equal(0);
        });
      }

      it("refuses a ttl given as a string, a non-integer token, and unknown fields", async () => {
        await expectInvalid(
          store.acquire({ shard: "s1", agent: "a", ttlMs: "6000" as unknown as number }),
          "ttlMs",
        );
        await expectInvalid(store.renew({ shard: "s1", agent: "a", token: 1.5 }), "token");
        await expectInvalid(store.fence({ shard: "s1", token: -3 }), "token");
        await expectInvalid(store.acquire({ shard: "s1", agent: "a", extra: 1 } as never), "(root)");
        expect(await backend.storedKeys(store)).to.equal(0);
      });

      it("checks a renew again whenever any field differs from the last one it accepted for the shard", async () => {
        const granted = await store.acquire({ shard: "s1", agent: "a", ttlMs: 10_000 });
        if (!granted.ok) throw new Error("not granted");
        const renew = { shard: "s1", agent: "a", token: granted.token, ttlMs: 10_000 };
        expect(await store.renew(renew)).to.include({ ok: true });
        expect(await store.renew({ ...renew })).to.include({ ok: true });
        // The same shard with one field changed is parsed afresh: each is refused.
        await expectInvalid(store.renew({ ...renew, token: granted.token + 0.5 }), "token");
        await expectInvalid(store.renew({ ...renew, ttlMs: 5 }), "ttlMs");
        await expectInvalid(store.renew({ ...renew, agent: "tab\there" }), "agent");
        await expectInvalid(store.renew({ ...renew, extra: 1 } as never), "(root)");
        await expectInvalid(store.renew({ ...renew, token: String(granted.token) as never }), "token");
        // Refused, so written nothing: the lease is as the last accepted renew left it.
        const { current, lastToken } = await store.read("s1");
        expect(current).to.include({ holder: "a", token: granted.token });
        expect(current!.ttlMs).to.be.within(9_000, 10_000);
        expect(lastToken).to.equal(granted.token);
        const { ttlMs: _dropped, ...withoutTtl } = renew;
        // No TTL: the default (6 s) is this renew's, not the remembered 10 s.
        const defaulted = await store.renew(withoutTtl);
        expect(defaulted.ok && defaulted.ttlMs).to.be.within(5_000, 6_000);
        const again = await store.renew(renew);
        expect(again.ok && again.ttlMs).to.be.within(9_000, 10_000);
      });

      it("names every offending field at once", async () => {
        const error = await expectInvalid(
          store.renew({ shard: "no way", agent: "", token: 0, ttlMs: 5 }),
          "shard",
        );
        expect(error.issues.map((i) => i.field).sort()).to.deep.equal(["agent", "shard", "token", "ttlMs"]);
      });
    });
  });
}
