import { expect } from "chai";
import {
  EMPTY_SHARD_STATE,
  mintToken,
  transition,
  type LeaseOperation,
  type ShardLeaseState,
  type StoreClockReading,
} from "../../src/core/lease/machine.js";
import { seededRandom } from "../../src/runtime/random.js";

/** A store reading at `nowUs` for a store that started long ago. */
const at = (nowUs: number) => ({ nowUs, bootUs: 0 });

/** The pure lease state machine, driven by explicit times (microseconds). */
describe("Lease state machine (pure)", () => {
  const T0 = 1_800_000_000_000_000;
  const acquire = (state: ShardLeaseState, agent: string, nowUs: number, ttlMs = 6000) =>
    transition(state, { kind: "acquire", agent, ttlMs }, at(nowUs));

  it("a lease is dead from its expiry instant on, to the microsecond", () => {
    const { state } = acquire(EMPTY_SHARD_STATE, "a", T0, 1000);
    const justBefore = acquire(state, "b", T0 + 999_999);
    expect(justBefore.outcome).to.include({ ok: false, reason: "held" });
    expect(justBefore.outcome.ok === false && justBefore.outcome.current?.ttlMs).to.equal(0);
    expect(acquire(state, "b", T0 + 1_000_000).outcome).to.include({ ok: true, holder: "b" });
  });

  it("mints tokens above the last one and at least the clock", () => {
    expect(mintToken(0, T0)).to.equal(T0);
    expect(mintToken(T0 + 5, T0)).to.equal(T0 + 6);
    const first = acquire(EMPTY_SHARD_STATE, "a", T0);
    const released = transition(first.state, { kind: "release", agent: "a", token: T0 }, at(T0 + 1));
    // Same microsecond as the previous token: the counter term wins.
    const second = acquire(released.state, "b", T0);
    expect(second.outcome).to.include({ ok: true, token: T0 + 1 });
    expect(second.state.lastToken).to.equal(T0 + 1);
  });

  it("after losing every key, a later clock still gives a larger token", () => {
    const before = acquire(EMPTY_SHARD_STATE, "a", T0).outcome;
    const after = acquire(EMPTY_SHARD_STATE, "b", T0 + 1).outcome;
    expect(after.ok && before.ok && after.token > before.token).to.equal(true);
  });

  it("refusals leave the state untouched", () => {
    const held = acquire(EMPTY_SHARD_STATE, "a", T0).state;
    for (const op of [
      { kind: "acquire", agent: "b", ttlMs: 6000 },
      { kind: "renew", agent: "b", token: T0, ttlMs: 6000 },
      { kind: "renew", agent: "a", token: T0 - 1, ttlMs: 6000 },
      { kind: "release", agent: "b", token: T0 },
      { kind: "fence", token: T0 - 1 },
    ] as const) {
      expect(transition(held, op, at(T0 + 10)).state, op.kind).to.equal(held);
    }
  });

  it("renew keeps the token and restarts the ttl from now; an expired lease cannot be renewed", () => {
    const held = acquire(EMPTY_SHARD_STATE, "a", T0, 3000).state;
    const renewed = transition(
      held,
      { kind: "renew", agent: "a", token: T0, ttlMs: 3000 },
      at(T0 + 2_000_000),
    );
    expect(renewed.outcome).to.include({ ok: true, token: T0, ttlMs: 3000 });
    expect(renewed.state.lease?.expiresAtUs).to.equal(T0 + 5_000_000);
    const late = transition(held, { kind: "renew", agent: "a", token: T0, ttlMs: 3000 }, at(T0 + 3_000_000));
    expect(late.outcome).to.include({ ok: false, reason: "expired" });
  });

  it("a store that started empty less than one TTL ago grants no lease on a shard it has no history of", () => {
    const clock = { nowUs: T0 + 2_000_000, bootUs: T0 };
    const early = transition(EMPTY_SHARD_STATE, { kind: "acquire", agent: "a", ttlMs: 6000 }, clock);
    expect(early.outcome).to.deep.equal({
      ok: false,
      reason: "recovering",
      current: null,
      retryAfterMs: 4000,
    });
    expect(early.state).to.equal(EMPTY_SHARD_STATE);
    const later = transition(
      EMPTY_SHARD_STATE,
      { kind: "acquire", agent: "a", ttlMs: 6000 },
      { nowUs: T0 + 6_000_000, bootUs: T0 },
    );
    expect(later.outcome).to.include({ ok: true, token: T0 + 6_000_000 });
    // A shard with history is not held back: its state survived, so nothing was forgotten.
    const known = { ...EMPTY_SHARD_STATE, lastToken: 42 };
    expect(transition(known, { kind: "acquire", agent: "a", ttlMs: 6000 }, clock).outcome).to.include({
      ok: true,
    });
  });
});

describe("Lease state machine: a store that may have lost writes (lineage)", () => {
  const T0 = 1_800_000_000_000_000;
  const first = { id: "replid-1", promoted: false };
  const promoted = { id: "replid-2", promoted: true };
  const at = (nowUs: number, lineage = first) => ({ nowUs, bootUs: T0 - 3_600_000_000, lineage });

  it("holds every write for one TTL after a promotion, then grants above every earlier token", () => {
    const granted = transition(EMPTY_SHARD_STATE, { kind: "acquire", agent: "a", ttlMs: 6000 }, at(T0));
    expect(granted.outcome).to.include({ ok: true });
    expect(granted.state.lineage).to.equal("replid-1");
    const old = (granted.outcome as { token: number }).token;
    // The replica promoted has this state (replicated) or not: both are held.
    for (const state of [granted.state, EMPTY_SHARD_STATE]) {
      const noticed = transition(
        state,
        { kind: "acquire", agent: "b", ttlMs: 6000 },
        at(T0 + 1000, promoted),
      );
      expect(noticed.outcome).to.deep.equal({
        ok: false,
        reason: "recovering",
        current: null,
        retryAfterMs: 6000,
      });
      const renew = transition(
        noticed.state,
        { kind: "renew", agent: "a", token: old, ttlMs: 6000 },
        at(T0 + 2_000_000, promoted),
      );
      expect(renew.outcome).to.include({ ok: false, reason: "recovering", retryAfterMs: 4001 });
      const fence = transition(noticed.state, { kind: "fence", token: old }, at(T0 + 2_000_000, promoted));
      expect(fence.outcome).to.include({ allowed: false, reason: "recovering" });
      const after = transition(
        noticed.state,
        { kind: "acquire", agent: "b", ttlMs: 6000 },
        at(T0 + 1000 + 6_000_000, promoted),
      );
      expect(after.outcome).to.include({ ok: true, holder: "b" });
      expect((after.outcome as { token: number }).token).to.be.above(old);
    }
  });

  it("a restart from persistence (a new lineage, not promoted) holds what it wrote before", () => {
    const granted = transition(EMPTY_SHARD_STATE, { kind: "acquire", agent: "a", ttlMs: 2000 }, at(T0));
    const restarted = { id: "replid-3", promoted: false };
    const renew = transition(
      granted.state,
      { kind: "renew", agent: "a", token: (granted.outcome as { token: number }).token, ttlMs: 2000 },
      at(T0 + 500_000, restarted),
    );
    expect(renew.outcome).to.include({ ok: false, reason: "recovering", retryAfterMs: 2000 });
    // A shard that lineage never wrote, on a store that continues no other: nothing to lose.
    const fresh = transition(
      EMPTY_SHARD_STATE,
      { kind: "acquire", agent: "a", ttlMs: 2000 },
      at(T0, restarted),
    );
    expect(fresh.outcome).to.include({ ok: true });
  });

  it("one lineage throughout: no hold, ever (the memory store has none at all)", () => {
    let state = transition(EMPTY_SHARD_STATE, { kind: "acquire", agent: "a", ttlMs: 2000 }, at(T0)).state;
    const token = state.lease!.token;
    for (let i = 1; i <= 5; i++) {
      const step = transition(state, { kind: "renew", agent: "a", token, ttlMs: 2000 }, at(T0 + i * 600_000));
      expect(step.outcome).to.include({ ok: true });
      state = step.state;
    }
    const memory = { nowUs: T0 + 10_000_000, bootUs: T0 - 3_600_000_000 };
    expect(transition(state, { kind: "acquire", agent: "b", ttlMs: 2000 }, memory).outcome).to.include({
      ok: true,
    });
  });
});

describe("Lease state machine: a renew written into the state it is given (reuse)", () => {
  /** A deep copy: what a state held before anything could write into it. */
  const copy = (state: ShardLeaseState): ShardLeaseState => ({
    ...state,
    lease: state.lease === null ? null : { ...state.lease },
  });

  it("gives the same outcome and state as a new state each time, over random operations and lineage changes (property, seeded)", () => {
    let renewsInPlace = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const random = seededRandom(seed);
      let fresh: ShardLeaseState = EMPTY_SHARD_STATE;
      let owned: ShardLeaseState = EMPTY_SHARD_STATE;
      let nowUs = 1_800_000_000_000_000;
      let lineage = "l0";
      for (let i = 0; i < 500; i++) {
        nowUs += Math.floor(random() * 3_000_000);
        if (random() < 0.02) lineage = `l${i}`;
        const clock: StoreClockReading = {
          nowUs,
          bootUs: 0,
          ...(random() < 0.7 ? { lineage: { id: lineage, promoted: random() < 0.5 } } : {}),
        };
        const agent = random() < 0.5 ? "a" : "b";
        const token = fresh.lease?.token ?? 1;
        const roll = random();
        const op: LeaseOperation =
          roll < 0.5
            ? {
                kind: "renew",
                agent,
                token: random() < 0.9 ? token : token - 1,
                ttlMs: 1000 + Math.floor(random() * 5000),
              }
            : roll < 0.8
              ? { kind: "acquire", agent, ttlMs: 1000 + Math.floor(random() * 5000) }
              : roll < 0.9
                ? { kind: "release", agent, token }
                : { kind: "fence", token };
        const before = copy(fresh);
        const pure = transition(fresh, op, clock);
        const inPlace = transition(owned, op, clock, true);
        const where = `seed ${seed}, op ${i} (${op.kind})`;
        expect(inPlace.outcome, where).to.deep.equal(pure.outcome);
        expect(copy(inPlace.state), where).to.deep.equal(copy(pure.state));
        expect(copy(fresh), `${where}: without reuse the old state is left as it was`).to.deep.equal(before);
        if (op.kind === "renew" && "ok" in pure.outcome && pure.outcome.ok && inPlace.state === owned)
          renewsInPlace++;
        fresh = pure.state;
        owned = inPlace.state;
      }
    }
    expect(renewsInPlace, "renews granted in place").to.be.greaterThan(1000);
  });

  it("never writes into the shared empty state", () => {
    const outcome = transition(
      EMPTY_SHARD_STATE,
      { kind: "renew", agent: "a", token: 1, ttlMs: 6000 },
      at(5),
      true,
    );
    expect(outcome.outcome.ok).to.equal(false);
    expect(EMPTY_SHARD_STATE).to.deep.equal({ lease: null, lastToken: 0, lineage: null, holdUntilUs: 0 });
  });
});
