import { expect } from "chai";
import {
  advanceKeeper,
  initialKeeperState,
  keeperStep,
  mayAct,
  type KeeperAction,
  type KeeperConfig,
  type KeeperEvent,
  type KeeperState,
} from "../../src/core/keeper/machine.js";
import {
  EMPTY_SHARD_STATE,
  transition,
  type LeaseOperation,
  type LeaseOutcome,
  type ShardLeaseState,
} from "../../src/core/lease/machine.js";
import { seededRandom } from "../../src/runtime/random.js";

const CONFIG: KeeperConfig = { ttlMs: 6000, standbyPollMs: 500 };
const GRANTED: LeaseOutcome = { ok: true, holder: "a", token: 7, ttlMs: 6000, sinceUs: 0 };
/** a standby that waits at the bridge, and the refusal it waits behind */
const WAITING: KeeperConfig = { ...CONFIG, waitMs: 30_000 };
const HELD: LeaseOutcome = {
  ok: false,
  reason: "held",
  current: { holder: "b", token: 5, ttlMs: 4000, sinceUs: 0 },
};

/** The machine driven by hand: clocks set per event, actions collected. */
class Driven {
  state: KeeperState = initialKeeperState(CONFIG);
  mono = 1000;
  wall = 1_800_000_000_000;
  actions: KeeperAction[] = [];

  on(event: KeeperEvent, config = CONFIG): KeeperAction[] {
    const step = keeperStep(config, this.state, event, { mono: this.mono, wall: this.wall, random: 0.5 });
    this.state = step.state;
    this.actions = step.actions;
    return step.actions;
  }
  /** both clocks move on together */
  advance(ms: number): this {
    this.mono += ms;
    this.wall += ms;
    return this;
  }
  sent() {
    const send = this.actions.find((a) => a.kind === "send");
    if (send === undefined || send.op === "release") throw new Error("no request sent");
    return send;
  }
  reports() {
    return this.actions.flatMap((a) => (a.kind === "report" ? [a.report.kind] : []));
  }
  timer(name: "step" | "deadline") {
    return this.actions.find((a) => a.kind === "timer" && a.timer === name) as
      { atMono: number | null } | undefined;
  }
  /** start, ask, and be granted after `latencyMs` */
  activate(latencyMs = 10, outcome: LeaseOutcome = GRANTED): this {
    this.on({ kind: "start" });
    this.on({ kind: "step" });
    const { attempt, sent } = this.sent();
    this.advance(latencyMs);
    this.on({ kind: "acquired", attempt, sent, outcome });
    return this;
  }
}

describe("Keeper machine (pure): a standby that waits at the bridge (waitMs)", () => {
  /** started and refused once (its first acquire is a plain one): now it asks with a wait */
  const refusedOnce = () => {
    const k = new Driven();
    k.on({ kind: "start" }, WAITING);
    k.on({ kind: "step" }, WAITING);
    const first = k.sent();
    expect(first).to.include({ op: "acquire", waitMs: 0, timeout: 4000 });
    k.advance(2).on({ kind: "acquired", attempt: first.attempt, sent: first.sent, outcome: HELD }, WAITING);
    expect(k.reports(), "it says whom it stands behind").to.deep.equal(["standby"]);
    expect(k.timer("step")!.atMono, "and asks again at once").to.equal(k.mono);
    k.on({ kind: "step" }, WAITING);
    return k;
  };

  it("asks first without a wait, then with one, its timeout the wait plus 2/3 TTL", () => {
    expect(refusedOnce().sent()).to.include({ op: "acquire", waitMs: 30_000, timeout: 34_000 });
  });

  it("granted after a wait: counts its lease from the send plus the wait the bridge reports", () => {
    const k = refusedOnce();
    const { attempt, sent } = k.sent();
    k.advance(5000).on({ kind: "acquired", attempt, sent, outcome: GRANTED, waitedMs: 4990 }, WAITING);
    expect(k.reports()).to.deep.equal(["active"]);
    expect(k.state.deadlineMono).to.equal(sent.mono + 4990 + 4000);
    // Without `waitedMs` the same answer came too late to act on (5 s > 2/3 TTL after the send).
    const late = refusedOnce();
    const asked = late.sent();
    late
      .advance(5000)
      .on({ kind: "acquired", attempt: asked.attempt, sent: asked.sent, outcome: GRANTED }, WAITING);
    expect(late.reports()).to.deep.equal([]);
    expect(late.state.phase).to.equal("standby");
  });

  it("answered after a wait: asks again at once; answered by a bridge that cannot wait: polls", () => {
    const k = refusedOnce();
    const waited = k.sent();
    k.advance(800).on(
      { kind: "acquired", attempt: waited.attempt, sent: waited.sent, outcome: HELD, waitedMs: 795 },
      WAITING,
    );
    expect(k.timer("step")!.atMono).to.equal(k.mono);
    k.on({ kind: "step" }, WAITING);
    const old = k.sent();
    k.advance(2).on({ kind: "acquired", attempt: old.attempt, sent: old.sent, outcome: HELD }, WAITING);
    expect(k.timer("step")!.atMono, "a jittered poll").to.equal(k.mono + 375);
  });
});

describe("Keeper machine (pure): a failed acquire the driver says to wait after", () => {
  it("asks again after that wait, not a poll, and says whom it stands behind again once answered", () => {
    const k = new Driven();
    k.on({ kind: "start" }, WAITING);
    k.on({ kind: "step" }, WAITING);
    const first = k.sent();
    k.advance(2).on({ kind: "acquired", attempt: first.attempt, sent: first.sent, outcome: HELD }, WAITING);
    expect(k.reports()).to.deep.equal(["standby"]);
    k.on({ kind: "step" }, WAITING);
    const waiting = k.sent();
    expect(waiting).to.include({ waitMs: 30_000 });

    // The bridge no longer knows the shard: the driver asks for 4 s.
    const gone = { kind: "failed", attempt: waiting.attempt, op: "acquire", error: "404" } as const;
    k.advance(3).on({ ...gone, retryAfterMs: 4000 }, WAITING);
    expect(k.reports()).to.deep.equal(["store-error"]);
    expect(k.timer("step")!.atMono).to.equal(k.mono + 4000);
    // Its next acquire does not wait at the bridge: it is answered at once, and the
    // standby reported again although holder and reason are the same as before.
    k.advance(4000).on({ kind: "step" }, WAITING);
    const back = k.sent();
    expect(back).to.include({ waitMs: 0 });
    k.advance(2).on({ kind: "acquired", attempt: back.attempt, sent: back.sent, outcome: HELD }, WAITING);
    expect(k.reports()).to.deep.equal(["standby"]);

    // Without a wait from the driver, a failure is followed by a standby's jittered poll.
    k.on({ kind: "step" }, WAITING);
    const again = k.sent();
    k.advance(2).on({ kind: "failed", attempt: again.attempt, op: "acquire", error: "503" }, WAITING);
    expect(k.timer("step")!.atMono).to.equal(k.mono + 375);
  });
});

describe("Keeper machine (pure): the agent's side of the lease", () => {
  it("asks at once, becomes active, renews at TTL/3 and stops at 2/3 TTL, both counted from the send", () => {
    const k = new Driven();
    expect(k.on({ kind: "start" })).to.deep.equal([{ kind: "timer", timer: "step", atMono: 1000 }]);
    k.on({ kind: "step" });
    const asked = k.sent();
    expect(asked).to.include({ op: "acquire", timeout: 4000 });
    k.advance(300).on({ kind: "acquired", attempt: asked.attempt, sent: asked.sent, outcome: GRANTED });
    expect(k.reports()).to.deep.equal(["active"]);
    expect(k.state).to.include({ phase: "active", token: 7, deadlineMono: 1000 + 4000 });
    expect(k.timer("step")!.atMono).to.equal(1000 + 2000);
    expect(k.timer("deadline")!.atMono).to.equal(1000 + 4000);

    k.advance(1700).on({ kind: "step" });
    const renew = k.sent();
    expect(renew).to.include({ op: "renew", token: 7, timeout: 2000 });
    k.advance(900).on({ kind: "renewed", attempt: renew.attempt, sent: renew.sent, outcome: GRANTED });
    expect(k.reports()).to.deep.equal(["renewed"]);
    // From the renew's send (3000), not its answer (3900): the store counted from no earlier.
    expect(k.state.deadlineMono).to.equal(3000 + 4000);
    expect(k.timer("step")!.atMono).to.equal(3000 + 2000);
  });

  it("a frozen agent whose timers never ran stops on its first check past the deadline", () => {
    const k = new Driven().activate();
    expect(mayAct(k.state, k.mono, k.wall)).to.equal(true);
    k.advance(4000); // SIGSTOP: no timer fired; the monotonic clock went on
    k.on({ kind: "check" });
    expect(k.state.phase).to.equal("standby");
    expect(k.actions).to.deep.include({
      kind: "report",
      report: {
        kind: "lost",
        token: 7,
        reason: "deadline",
        detail: "renew deadline passed before a renew succeeded",
      },
    });
    expect(k.timer("step")!.atMono).to.be.within(k.mono + 250, k.mono + 500);
  });

  it("a suspended host (monotonic clock stopped, wall clock on) stops by the wall clock", () => {
    const k = new Driven().activate();
    k.wall += 60_000; // the VM was paused a minute; CLOCK_MONOTONIC did not move
    expect(mayAct(k.state, k.mono, k.wall)).to.equal(false);
    k.on({ kind: "check" });
    expect(k.reports()).to.deep.equal(["lost"]);
  });

  it("a wall clock stepped back does not extend the deadline: the monotonic one still rules", () => {
    const k = new Driven().activate(0);
    k.wall -= 3_600_000;
    k.mono += 4000;
    k.on({ kind: "check" });
    expect(k.state.phase).to.equal("standby");
  });

  it("a deadline timer that fires early is armed again, and the agent keeps acting", () => {
    const k = new Driven().activate(0);
    k.advance(3999).on({ kind: "deadline" });
    expect(k.state.phase).to.equal("active");
    expect(k.timer("deadline")!.atMono).to.equal(1000 + 4000);
    k.advance(1).on({ kind: "deadline" });
    expect(k.state.phase).to.equal("standby");
  });

  it("a grant that arrives after its deadline is not acted on: the agent asks again later", () => {
    const k = new Driven();
    k.on({ kind: "start" });
    k.on({ kind: "step" });
    const { attempt, sent } = k.sent();
    k.advance(4000).on({ kind: "acquired", attempt, sent, outcome: GRANTED });
    expect(k.state.phase).to.equal("standby");
    expect(k.reports()).to.deep.equal([]);
    expect(k.timer("step")).to.not.equal(undefined);
  });

  it("drops a late answer to an earlier request: a renew answered after the agent lost and re-won", () => {
    const k = new Driven().activate(0);
    k.advance(2000).on({ kind: "step" });
    const oldRenew = k.sent();
    k.advance(2000).on({ kind: "check" }); // lost at the deadline, the renew unanswered
    k.advance(250).on({ kind: "step" });
    const again = k.sent();
    k.on({ kind: "acquired", attempt: again.attempt, sent: again.sent, outcome: { ...GRANTED, token: 9 } });
    expect(k.state).to.include({ phase: "active", token: 9 });
    const before = k.state;
    k.on({
      kind: "renewed",
      attempt: oldRenew.attempt,
      sent: oldRenew.sent,
      outcome: { ...GRANTED, ok: true },
    });
    expect(k.state).to.equal(before);
    expect(k.actions).to.deep.equal([]);
  });

  it("a refused renew loses at once; standby is reported only when holder or reason changes", () => {
    const k = new Driven().activate(0);
    k.advance(2000).on({ kind: "step" });
    const renew = k.sent();
    const held = { holder: "b", token: 8, ttlMs: 5000, sinceUs: 0 };
    k.on({
      kind: "renewed",
      attempt: renew.attempt,
      sent: renew.sent,
      outcome: { ok: false, reason: "stale_token", current: held },
    });
    expect(k.actions).to.deep.include({
      kind: "report",
      report: { kind: "lost", token: 7, reason: "refused", detail: "renew refused: stale_token (holder b)" },
    });
    const refused: LeaseOutcome = { ok: false, reason: "held", current: held };
    for (const expected of [["standby"], []]) {
      k.advance(500).on({ kind: "step" });
      const ask = k.sent();
      k.on({ kind: "acquired", attempt: ask.attempt, sent: ask.sent, outcome: refused });
      expect(k.reports()).to.deep.equal(expected);
      // back no later than one poll, and no later than the holder's lease runs out
      expect(k.timer("step")!.atMono! - k.mono).to.be.at.most(500);
    }
  });

  it("adopts a shorter TTL the store grants, and times renews and the deadline by it", () => {
    const k = new Driven().activate(0, { ...GRANTED, ttlMs: 3000 });
    expect(k.state.ttlMs).to.equal(3000);
    expect(k.timer("step")!.atMono).to.equal(1000 + 1000);
    expect(k.timer("deadline")!.atMono).to.equal(1000 + 2000);
  });

  it("retries a failed renew soon, and still stops at the deadline if none gets through", () => {
    const k = new Driven().activate(0);
    k.advance(2000).on({ kind: "step" });
    const renew = k.sent();
    k.advance(100).on({ kind: "failed", attempt: renew.attempt, op: "renew", error: "ECONNRESET" });
    expect(k.reports()).to.deep.equal(["store-error"]);
    expect(k.timer("step")!.atMono).to.equal(k.mono + 500);
    k.advance(500).on({ kind: "step" });
    expect(k.sent()).to.include({ op: "renew", timeout: 5000 - k.mono });
    k.advance(1400).on({ kind: "deadline" });
    expect(k.state.phase).to.equal("standby");
  });

  it("stop hands an active lease back, and a lease granted after stop straight back too", () => {
    const k = new Driven().activate(0);
    k.on({ kind: "stop" });
    expect(k.actions).to.deep.include({ kind: "send", op: "release", token: 7, timeout: 4000 });
    expect(k.state.phase).to.equal("stopped");

    const late = new Driven();
    late.on({ kind: "start" });
    late.on({ kind: "step" });
    const ask = late.sent();
    late.on({ kind: "stop" });
    late.on({ kind: "acquired", attempt: ask.attempt, sent: ask.sent, outcome: GRANTED });
    expect(late.actions).to.deep.equal([{ kind: "send", op: "release", token: 7, timeout: 4000 }]);
    expect(late.state.phase).to.equal("stopped");
  });

  /**
   * Two agents' machines against the pure store machine, over a network with random
   * delays (requests arrive in any order, answers may come after the agent gave up), with
   * agents frozen at random (their events wait, their monotonic clock goes on) and clocks
   * that start apart. Every time an agent acts, the store's own record must show it as
   * the live holder under the token it acts with.
   */
  it("never acts unless the store's record shows it the live holder (property, seeded)", () => {
    type Op = Exclude<LeaseOperation, { kind: "fence" } | { kind: "read" }>;
    interface Agent {
      id: string;
      state: KeeperState;
      monoOffset: number;
      wallOffset: number;
      frozenUntil: number;
    }
    interface Request {
      op: Op;
      outcome?: unknown;
    }
    type Entry =
      | { at: number; kind: "event"; agent: Agent; event: KeeperEvent }
      | { at: number; kind: "arrive"; request: Request }
      /** the agent's own work, at random moments: it checks, then acts if it may */
      | { at: number; kind: "act"; agent: Agent }
      | {
          at: number;
          kind: "answer";
          agent: Agent;
          request: Request;
          send: Extract<KeeperAction, { kind: "send" }>;
        };

    for (let seed = 1; seed <= 40; seed++) {
      const random = seededRandom(seed);
      const ttlMs = 1000 + Math.floor(random() * 5000);
      const config = { ttlMs, standbyPollMs: 200 };
      let store: ShardLeaseState = EMPTY_SHARD_STATE;
      const agents: Agent[] = ["a", "b"].map((id) => ({
        id,
        state: initialKeeperState(config),
        monoOffset: random() * 1e6,
        wallOffset: random() * 1e6,
        frozenUntil: 0,
      }));
      const queue: Entry[] = [];
      let t = 0;
      let acts = 0;
      const deliver = (a: Agent, event: KeeperEvent) => {
        const step = keeperStep(config, a.state, event, {
          mono: t + a.monoOffset,
          wall: t + a.wallOffset,
          random: random(),
        });
        a.state = step.state;
        for (const action of step.actions) {
          if (action.kind === "timer" && action.atMono !== null)
            queue.push({
              at: action.atMono - a.monoOffset,
              kind: "event",
              agent: a,
              event: { kind: action.timer === "step" ? "step" : "deadline" },
            });
          if (action.kind !== "send") continue;
          const op: Op =
            action.op === "acquire"
              ? { kind: "acquire", agent: a.id, ttlMs }
              : { kind: action.op, agent: a.id, token: action.token, ttlMs };
          const request: Request = { op };
          const arriveAt = t + random() * ttlMs * 0.4;
          // One request in ten is lost on the way, one answer in ten on the way back: the
          // agent hears nothing and gives up at its timeout.
          const lost = random();
          if (lost >= 0.1) queue.push({ at: arriveAt, kind: "arrive", request });
          const answerAt = lost < 0.2 ? t + action.timeout + 1 : arriveAt + random() * ttlMs * 0.4;
          queue.push({ at: answerAt, kind: "answer", agent: a, request, send: action });
        }
      };
      for (const a of agents) {
        deliver(a, { kind: "start" });
        for (let at = random() * 50; at < 60_000; at += random() * ttlMs * 0.1)
          queue.push({ at, kind: "act", agent: a });
      }
      while (t < 60_000 && queue.length > 0) {
        queue.sort((x, y) => x.at - y.at);
        const next = queue.shift()!;
        t = Math.max(t, next.at);
        if (next.kind === "arrive") {
          const step = transition(store, next.request.op, { nowUs: t * 1000, bootUs: -1e12 });
          store = step.state;
          next.request.outcome = step.outcome;
          continue;
        }
        const a = next.agent;
        if (a.frozenUntil > t) {
          queue.push({ ...next, at: a.frozenUntil }); // a frozen agent handles nothing until thawed
          continue;
        }
        if (next.kind === "event") deliver(a, next.event);
        else if (next.kind === "act") {
          // handled below, like every other moment the agent runs
        } else if (next.send.op !== "release") {
          const { attempt, sent, timeout, op } = next.send;
          const { request } = next;
          // The driver gives up on a request at its timeout: a later answer is a failure.
          const late = request.outcome === undefined || t + a.monoOffset - sent.mono > timeout;
          deliver(
            a,
            late
              ? { kind: "failed", attempt, op, error: "timeout" }
              : {
                  kind: op === "acquire" ? "acquired" : "renewed",
                  attempt,
                  sent,
                  outcome: request.outcome as LeaseOutcome,
                },
          );
        }
        // The agent acts now, checking first as a caller of token() does.
        deliver(a, { kind: "check" });
        if (mayAct(a.state, t + a.monoOffset, t + a.wallOffset)) {
          acts++;
          const live = store.lease;
          const where = `seed ${seed}, t ${t.toFixed(1)} ms, ${a.id} acting under ${a.state.token}`;
          expect(live, `${where}: no lease in the store`).to.not.equal(null);
          expect(live!.holder, where).to.equal(a.id);
          expect(live!.token, where).to.equal(a.state.token);
          expect(live!.expiresAtUs, `${where}: the lease has expired`).to.be.above(t * 1000);
        }
        if (random() < 0.02) a.frozenUntil = t + random() * 2 * ttlMs;
      }
      expect(acts, `seed ${seed}: the agents acted`).to.be.greaterThan(10);
    }
  });

  it("written into the state it is given (reuse), the rules step exactly as with a new state each time (property, seeded)", () => {
    const events = (
      random: () => number,
      config: KeeperConfig,
      state: KeeperState,
      now: number,
    ): KeeperEvent => {
      const outcome = (): LeaseOutcome =>
        random() < 0.6
          ? {
              ok: true,
              holder: "a",
              token: 1 + Math.floor(random() * 3),
              ttlMs: 1000 + Math.floor(random() * 6000),
              sinceUs: 0,
            }
          : {
              ok: false,
              reason: (["held", "expired", "stale_token", "recovering"] as const)[Math.floor(random() * 4)]!,
              current:
                random() < 0.5
                  ? null
                  : { holder: random() < 0.5 ? "a" : "b", token: 2, ttlMs: 3000, sinceUs: 0 },
              retryAfterMs: 100,
            };
      // Answers name the attempt in flight most of the time, an older one sometimes.
      const attempt = state.attempt - (random() < 0.8 ? 0 : 1);
      // Sent a moment ago, mostly: answers in time to act on, and some too late.
      const sent = { mono: now - random() * 1e6, wall: now - random() * 1e6 };
      // Half the time, what a keeper in this phase mostly hears: its own answers, granted.
      if (random() < 0.5 && state.phase !== "stopped") {
        const granted = {
          ok: true,
          holder: "a",
          token: state.token ?? 1,
          ttlMs: config.ttlMs,
          sinceUs: 0,
        } as const;
        if (random() < 0.4) return { kind: "step" };
        return {
          kind: state.phase === "active" ? "renewed" : "acquired",
          attempt: state.attempt,
          sent: { mono: now - random() * 1e5, wall: now - random() * 1e5 },
          outcome: granted,
        };
      }
      const pick = Math.floor(random() * 9);
      if (pick === 0) return { kind: "start" };
      if (pick <= 2) return { kind: "step" };
      if (pick === 3) return { kind: "deadline" };
      if (pick === 4) return { kind: "check" };
      if (pick === 5) return { kind: "acquired", attempt, sent, outcome: outcome() };
      if (pick === 6) return { kind: "renewed", attempt, sent, outcome: outcome() };
      if (pick === 7)
        return { kind: "failed", attempt, op: random() < 0.5 ? "acquire" : "renew", error: "lost" };
      return random() < 0.1 ? { kind: "stop" } : { kind: "step" };
    };
    let steps = 0;
    let active = 0;
    let renewed = 0;
    for (let seed = 1; seed <= 50; seed++) {
      const random = seededRandom(seed);
      const config: KeeperConfig = {
        ttlMs: 1000 + Math.floor(random() * 6000),
        standbyPollMs: 200,
        unitsPerMs: 1000,
      };
      let fresh = initialKeeperState(config);
      const owned = initialKeeperState(config);
      let mono = 0;
      for (let i = 0; i < 400; i++) {
        mono += random() * 1.5e6;
        const clocks = { mono, wall: mono + 5, random: random() };
        const event = events(random, config, fresh, mono);
        const before = fresh;
        const untouched = { ...before };
        const freshStep = keeperStep(config, fresh, event, clocks);
        const actions: KeeperAction[] = [];
        const next = advanceKeeper(config, owned, event, clocks, { act: (a) => actions.push(a) }, true);
        expect(next, "the state given is the one written").to.equal(owned);
        expect({ ...next }, `seed ${seed}, step ${i}, ${event.kind}`).to.deep.equal({ ...freshStep.state });
        expect(actions, `seed ${seed}, step ${i}, ${event.kind}`).to.deep.equal(freshStep.actions);
        expect({ ...before }, "without reuse the old state is left as it was").to.deep.equal(untouched);
        if (next.phase === "active") active++;
        if (actions.some((a) => a.kind === "report" && a.report.kind === "renewed")) renewed++;
        fresh = freshStep.state;
        steps++;
      }
    }
    expect(steps).to.equal(20_000);
    expect(active, "steps that left the keeper active").to.be.greaterThan(2000);
    expect(renewed, "renews granted in time (the simulator's hot step)").to.be.greaterThan(500);
  });
});
