import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { fenceKeyDigest, mintFenceKey } from "../../src/core/lease/fence-key.js";
import { backendsUnderTest } from "../helpers/backends.js";

/**
 * A lease's fence key: what the fenced Ironic endpoint takes as proof of the live lease
 * from a caller with no bearer token. Unguessable (128 bits of the OS's random source),
 * never derivable from what the API shows (the token follows the lease's start time), and
 * never kept by the store in a form that passes the fence.
 */
describe("Fence keys", () => {
  it("are 128 random bits in hex, never repeated, kept as their SHA-256", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const { key, digest } = mintFenceKey();
      expect(key).to.match(/^[0-9a-f]{32}$/);
      expect(digest).to.equal(fenceKeyDigest(key));
      seen.add(key);
    }
    expect(seen.size).to.equal(20_000);
    // SHA-256 (FIPS 180-2's "abc" vector): what the Lua and the memory store compare.
    expect(fenceKeyDigest("abc")).to.equal(
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  });

  for (const backend of backendsUnderTest()) {
    describe(backend.name, () => {
      before(() => backend.before());
      after(() => backend.after());

      it("a grant answers the key once; the store keeps its digest, never the key", async () => {
        const store = await backend.fresh();
        const grant = await store.acquire({ shard: "keyed", agent: "a", ttlMs: 10_000 });
        expect(grant.ok).to.equal(true);
        if (!grant.ok) return;
        expect(grant.fenceKey).to.match(/^[0-9a-f]{32}$/);
        const state = await backend.state(store);
        expect(state, "the store holds the key's digest").to.include(fenceKeyDigest(grant.fenceKey!));
        expect(state, "and never the key").to.not.include(grant.fenceKey);
        const renewed = await store.renew({ shard: "keyed", agent: "a", token: grant.token, ttlMs: 10_000 });
        expect(renewed, "a renew answers no key").to.not.have.property("fenceKey");
        const read = await store.read("keyed");
        expect(JSON.stringify(read)).to.not.include(grant.fenceKey);

        const fence = (token: number, fenceKey?: string) =>
          store.fence(
            fenceKey === undefined ? { shard: "keyed", token } : { shard: "keyed", token, fenceKey },
          );
        expect((await fence(grant.token, grant.fenceKey)).allowed).to.equal(true);
        expect((await fence(grant.token + 1, grant.fenceKey)).allowed, "the key with another token").to.equal(
          false,
        );
        expect((await fence(grant.token, randomBytes(16).toString("hex"))).allowed).to.equal(false);
        // A new grant (the same agent again) mints a new key: the old one no longer passes.
        await store.release({ shard: "keyed", agent: "a", token: grant.token });
        const again = await store.acquire({ shard: "keyed", agent: "a", ttlMs: 10_000 });
        expect(again.ok && again.fenceKey).to.not.equal(grant.fenceKey);
        expect((await fence(grant.token, grant.fenceKey)).allowed).to.equal(false);
        if (again.ok) expect((await fence(again.token, grant.fenceKey)).allowed).to.equal(false);
      });
    });
  }

  it("another agent does not find a live lease's key in 1,000,000 tries, knowing its token", async () => {
    const [memory] = backendsUnderTest();
    await memory!.before();
    const store = await memory!.fresh();
    const grant = await store.acquire({ shard: "guessed", agent: "holder", ttlMs: 300_000 });
    if (!grant.ok) throw new Error("not granted");
    // The guesses: 16 MB of the OS's random source, as an attacker with no better source would.
    const pool = randomBytes(16 * 1_000_000);
    let passed = 0;
    for (let i = 0; i < 1_000_000; i++) {
      const guess = pool.toString("hex", i * 16, i * 16 + 16);
      if ((await store.fence({ shard: "guessed", token: grant.token, fenceKey: guess })).allowed) passed++;
    }
    expect(passed).to.equal(0);
    expect(
      (await store.fence({ shard: "guessed", token: grant.token, fenceKey: grant.fenceKey })).allowed,
    ).to.equal(true);
    await memory!.after();
  }).timeout(120_000);
});
