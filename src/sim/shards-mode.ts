import {
  advanceKeeper,
  initialKeeperState,
  mayAct,
  standbyJitter,
  type KeeperAction,
  type KeeperActionSink,
  type KeeperConfig,
  type KeeperEvent,
  type KeeperReport,
  type KeeperState,
  type SentAt,
} from "../agent/keeper-machine.js";
import { renewIntervalMs } from "../domain/lease.js";
import {
  EMPTY_SHARD_STATE,
  transition,
  type LeaseOperation,
  type OutcomeOf,
  type LeaseOutcome,
  type ShardLeaseState,
  type StoreLineage,
} from "../lease/machine.js";
import {
  idle,
  noWaits,
  stepWaits,
  type ShardWaits,
  type WaitAction,
  type WaitEvent,
} from "../lease/waits.js";
import { Coverage } from "./coverage.js";
import type { FleetLayout } from "./fleet.js";
import { SimHost } from "./host.js";
import { EventQueue, type EventAction } from "./queue.js";
import type { Scenario } from "./scenario.js";

const MS = 1000;

type RenewOperation = Extract<LeaseOperation, { kind: "renew" }>;

/**
 * How far apart two readings of one host's clock may be and still be one instant: the
 * float slack of converting a local time to true time and back (`trueAt`, `local`).
 */
const CLOCK_SLACK_US = 1e-6;

/** One agent's lease keeper for one shard: the keeper machine's state and its timers here. */
interface Keeper {
  host: SimHost;
  shard: number;
  /** this agent-and-shard's number: ranks its renews among simultaneous events (EventQueue.atRenew) */
  uid: number;
  /** the host's incarnation this keeper belongs to: a restarted agent has new keepers */
  hostEpoch: number;
  /** the rules' state (src/agent/keeper-machine.ts) */
  machine: KeeperState;
  /** bumped whenever the machine arms or cancels its step timer: older timer events are dropped */
  stepEpoch: number;
  /** bumped when the keeper wins or loses a lease: the write loop and deadline watch of an older lease stop */
  leaseEpoch: number;
  /** the renew's request handlers for the current lease, and the renew itself, made once per lease */
  renewCalls: RequestCalls<LeaseOutcome> | null;
  renewOp: RenewOperation | null;
  /** the renew in flight, as the machine sent it */
  renewAttempt: number;
  renewSent: SentAt;
  /** cruising (see `cruise`): when its next renew is due, true µs; NaN when its renews are queue events */
  cruiseAtUs: number;
  /** the acquire's request handlers, made once per keeper */
  acquireCalls: RequestCalls<LeaseOutcome>;
  /**
   * Its timers' events, made once per keeper (not a closure per event): the step timer
   * (arg: the step epoch it was armed in), the write loop's check (arg: the lease epoch)
   * and the write's send (arg: the token).
   */
  onStep: EventAction;
  onWriteCheck: EventAction;
  onWriteSend: EventAction;
}

/**
 * What a request does at the store and with its answer (see `request`): made once per
 * keeper or lease; what differs per request (the machine's attempt and send time) comes
 * as arguments.
 */
interface RequestCalls<T> {
  apply: (atUs: number) => T;
  settle: (answer: T) => "now" | "on-arrival";
  onAnswer: (answer: T, attempt: number, sent: SentAt, nowUs: number, lagUs: number) => void;
  onTimeout: (attempt: number) => void;
}

/** A lease activity interval, for the timeline chart. */
export interface ActiveSpell {
  shard: number;
  agent: number;
  fromUs: number;
  toUs: number | null;
}

export interface ShardsModeResult {
  coverage: Coverage;
  /** renews run outside the queue (see `cruise`); counted among the events simulated */
  cruisedRenews: number;
  staleWritesRefused: number;
  /** writes that passed fencing without being the live holder's: must be 0 */
  staleWritesAccepted: number;
  spells: ActiveSpell[];
}

const STEP: KeeperEvent = { kind: "step" };
const DEADLINE: KeeperEvent = { kind: "deadline" };
const STOP: KeeperEvent = { kind: "stop" };
const START: KeeperEvent = { kind: "start" };
const NEVER_SENT: SentAt = { mono: 0, wall: 0 };

/**
 * A cruised renew would have done something other than a clean renew (a refusal, a lost
 * lease, a timeout, a draw from the random sequence): its moment has passed, so the run
 * cannot be kept. `simulate` runs the scenario again with every renew a queue event.
 */
export class CruiseBroken extends Error {
  constructor(what: string, atUs: number) {
    super(`a cruised renew at ${atUs} µs would have ${what}`);
    this.name = "CruiseBroken";
  }
}

/**
 * Shards with active/passive leases: a store running the pure lease state machine (the
 * same `transition` the memory store runs; expiry judged by the store's clock) and, per
 * agent and shard, the keeper machine the reference agent runs (`advanceKeeper`), fed on
 * each host's own clock in microseconds. This file keeps only what is not the rules: the
 * network, the store, the timers and the fenced writes.
 *
 * The driver's choices, stated:
 * - a simulated host has one clock: its monotonic and wall readings are the same;
 * - the machine's deadline timer gets no event of its own on a running host: the renew in
 *   flight times out at that very deadline (the machine sets the timeout so), and its
 *   timeout fires the deadline first. A frozen host, or one whose clock changes pace, gets
 *   a watch at the deadline (`watchDeadline`);
 * - a standby's polls that the store could only refuse (the lease is live) are not run
 *   one by one: after a "held" answer the standby polls next when the lease it was shown
 *   would run out, plus a jittered part of its poll interval (the machine's own jitter
 *   draw), and at once (plus jitter) when the holder hands the lease back. The first poll
 *   that can succeed happens as it would. The machine's rule (poll again within a poll
 *   interval) would cost a day of 500 standbys 100 million refused polls;
 * - a fleet in steady state at time 0: each shard's first candidate holds the lease,
 *   renewing at a random phase of its interval, and the standbys are somewhere in their
 *   poll cycle;
 * - a healthy holder cruises: see `cruise`.
 *
 * Cruise. Most of a day's events are healthy holders renewing (21.6 of 32 million in the
 * day of test/bench/sim.bench.ts), and a queue event per renew cost more than the renew's
 * rules. After a renew that succeeded at once, the holder's next renews are not queued:
 * each runs (`cruiseRenew`: the keeper machine and the lease machine, on the same clock
 * readings a queued one gets) at its own moment, when something is about to look at the
 * holder or its shard: any store operation on the shard, any event of the keeper, its
 * fenced writes, a barrier, the end of the run. The queue puts a renew among simultaneous
 * events by the keeper's number, not by when it was scheduled (EventQueue.atRenew), so
 * "every renew that comes before the event running now" is exact. A cruise ends — the
 * next renew is queued again — when an operation changes the shard's state, when the
 * keeper gets an event, and at the barrier ahead of every fault of the timeline (2 ×
 * latency + 1 µs before it, so the renews whose round trip a fault falls into run as
 * events). While cruising nothing else can reach the holder, so each of its renews is a
 * clean one; a cruised renew that would do anything else — a refusal, a timeout, a lost
 * lease, a random draw — throws `CruiseBroken` before it does, and `simulate` runs the
 * scenario again without cruising (`cruise: false`, which the tests hold the cruising run
 * to, report for report). Each cruised renew counts as an event, as the queued one would.
 */
export function runShardsMode(
  scenario: Scenario,
  layout: FleetLayout,
  queue: EventQueue,
  random: () => number,
  hosts: SimHost[],
  /** when the timeline's faults happen, sorted: the round trips they fall into run as events */
  faultTimesUs: readonly number[],
  /** run healthy holders' renews outside the queue (see `cruise`); false: every renew is an event */
  cruise = true,
): { result: ShardsModeResult; faults: ShardFaults; finish: (endUs: number) => void } {
  const { fleet } = scenario;
  const ttlMs = fleet.lease_ttl_ms;
  const intervalUs = renewIntervalMs(ttlMs) * MS;
  const latencyUs = fleet.latency_ms * MS;
  const pollUs = fleet.standby_poll_ms * MS;
  const writeUs = fleet.write_interval_ms * MS;
  const workUs = fleet.write_work_ms * MS;
  const jitter = (us: number) => standbyJitter(us, random());
  const config: KeeperConfig = {
    ttlMs,
    standbyPollMs: fleet.standby_poll_ms,
    unitsPerMs: MS,
    ...(fleet.standby_wait_ms > 0 && { waitMs: fleet.standby_wait_ms }),
  };

  const failsOver = scenario.timeline.some((fault) => fault.fault === "redis-failover");
  const store = {
    shards: new Map<number, ShardLeaseState>(),
    /** the store process started here (µs); the recovery wait counts from it */
    bootUs: -3_600_000_000,
    downUntilUs: -1,
    waiters: new Map<number, Set<Keeper>>(),
    /**
     * Which history of writes the server continues (StoreLineage): Redis's master_replid
     * and whether the server was promoted. Only a scenario with a failover needs one; a
     * store of one process its whole life has none, as the embedded store.
     */
    lineage: failsOver ? { id: "first", promoted: false } : (undefined as StoreLineage | undefined),
    lineages: 0,
    /** what the replica to be promoted next has: the shards as they were when it stopped following */
    replica: null as Map<number, ShardLeaseState> | null,
  };
  const coverage = new Coverage(layout.shardWeights, 0);
  const result: ShardsModeResult = {
    coverage,
    cruisedRenews: 0,
    staleWritesRefused: 0,
    staleWritesAccepted: 0,
    spells: [],
  };
  const openSpell = new Map<Keeper, ActiveSpell>();
  const storeClock = { nowUs: 0, bootUs: 0, lineage: undefined as StoreLineage | undefined };
  const keepersOf: Keeper[][] = hosts.map(() => []);

  /** `renew`: a renew, whose granted lease may be written into the store's state for the shard (see `transition`). */
  const storeOp = <Op extends LeaseOperation>(
    shard: number,
    op: Op,
    atUs: number,
    renew = false,
  ): OutcomeOf<Op> => {
    const cruiser = inCruise ? null : cruiserOf[shard]!;
    if (cruiser !== null) catchUp(cruiser);
    const state = store.shards.get(shard) ?? EMPTY_SHARD_STATE;
    // The store's clock reads whole microseconds, as Redis TIME does and the lease rules
    // expect: a fractional reading would make a fresh grant show 5,999 ms left. (One
    // reading object, refilled: the rules keep nothing of it.)
    storeClock.nowUs = Math.floor(atUs);
    storeClock.bootUs = Math.floor(store.bootUs);
    storeClock.lineage = store.lineage;
    const step = transition(state, op, storeClock, renew && cruiser === null);
    store.shards.set(shard, step.state);
    // Anything but the holder's renew that changes the shard ends its cruise.
    if (cruiser !== null && step.state !== state) endCruise(cruiser);
    return step.outcome;
  };

  /** Does a fault of the timeline fall in (fromUs, toUs]? */
  const faultWithin = (fromUs: number, toUs: number): boolean => {
    let lo = 0;
    let hi = faultTimesUs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (faultTimesUs[mid]! <= fromUs) lo = mid + 1;
      else hi = mid;
    }
    return lo < faultTimesUs.length && faultTimesUs[lo]! <= toUs;
  };

  /**
   * Messages to the store are applied at their sending moment, stamped with their arrival
   * time, unless a fault falls inside the round trip or a message sent the slow way is still
   * on its way: then they travel as events, so arrival order stays send order.
   */
  let slowUntilUs = -1;
  const fastPath = (sentUs: number) => sentUs >= slowUntilUs && !faultWithin(sentUs, sentUs + 2 * latencyUs);

  /** A one-way message to the store (a write, a release): applied on arrival, lost on a cut link or a down store. */
  const toStore = (host: SimHost, apply: (atUs: number) => void): void => {
    if (host.cutTo) return;
    const atUs = queue.now + latencyUs;
    if (fastPath(queue.now)) {
      if (store.downUntilUs <= atUs) apply(atUs);
      return;
    }
    if (cruising.size > 0) throw new CruiseBroken("seen a message on the slow path", queue.now);
    slowUntilUs = Math.max(slowUntilUs, atUs);
    queue.at(atUs, () => {
      if (store.downUntilUs <= queue.now) apply(queue.now);
    });
  };

  /**
   * A request from `host` to the store: it leaves now, is applied on arrival, and its
   * answer comes back; a cut link or a store that is down loses it, and the caller hears
   * nothing until its timeout. An answer that comes after the timeout counts as the timeout.
   *
   * Every message takes the same latency, so requests arrive in the order they were sent:
   * applying one at its sending moment, stamped with its arrival time, keeps the store's
   * order exact. Only a fault inside the round trip (a cut, a freeze, a crash, Redis going
   * down) needs the two legs as separate events. `settle` picks which answers are handled
   * at once (their handling does not depend on the moment) and which at the answer's time.
   */
  const request = <T>(
    host: SimHost,
    /** when it leaves: now, or a cruised renew's moment */
    sentUs: number,
    calls: RequestCalls<T>,
    attempt: number,
    sent: SentAt,
    timeoutLocalUs: number,
  ): void => {
    const sentLocal = host.local(sentUs);
    if (host.cutTo) return timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
    if (fastPath(sentUs)) {
      if (store.downUntilUs > sentUs + latencyUs)
        return timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
      const answer = calls.apply(sentUs + latencyUs);
      if (host.cutFrom || 2 * latencyUs * host.rateNow > timeoutLocalUs)
        return timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
      if (calls.settle(answer) === "now") calls.onAnswer(answer, attempt, sent, sentUs, 2 * latencyUs);
      else host.later(sentUs + 2 * latencyUs, () => calls.onAnswer(answer, attempt, sent, queue.now, 0));
      return;
    }
    // No message travels the slow way during a cruise: only a fault starts one, and a barrier ends every cruise first.
    if (cruising.size > 0) throw new CruiseBroken("met a message on the slow path", sentUs);
    slowUntilUs = Math.max(slowUntilUs, sentUs + latencyUs);
    queue.at(sentUs + latencyUs, () => {
      if (store.downUntilUs > queue.now) return timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
      const answer = calls.apply(queue.now);
      queue.at(queue.now + latencyUs, () => {
        if (host.cutFrom) return timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
        host.later(queue.now, () => {
          if (host.local() - sentLocal > timeoutLocalUs) calls.onTimeout(attempt);
          else calls.onAnswer(answer, attempt, sent, queue.now, 0);
        });
      });
    });
  };

  /** A request's timeout, heard when the caller's clock reads `atLocal`. */
  const timeout = <T>(host: SimHost, calls: RequestCalls<T>, attempt: number, atLocal: number): void => {
    host.later(host.trueAt(atLocal), () => calls.onTimeout(attempt));
  };

  const believe = (k: Keeper) => {
    coverage.add(k.shard, k.host.index, queue.now);
    const spell = { shard: k.shard, agent: k.host.index, fromUs: queue.now, toUs: null };
    openSpell.set(k, spell);
    result.spells.push(spell);
  };
  const disbelieve = (k: Keeper, atUs: number) => {
    coverage.remove(k.shard, atUs);
    const spell = openSpell.get(k);
    if (spell !== undefined) spell.toUs = atUs;
    openSpell.delete(k);
  };

  /** The clocks the machine reads: the host's, and a draw taken only when the rules use it. */
  let lastDraw = 0;
  const clocks = {
    mono: 0,
    wall: 0,
    get random(): number {
      if (inCruise) throw new CruiseBroken("drawn from the random sequence", clocks.mono);
      lastDraw = random();
      return lastDraw;
    },
  };

  /**
   * Where the machine's actions go. Timers and reports are handled as they come; the one
   * request an event can send waits until the machine's new state is in place, since its
   * answer may be handled at once.
   */
  const sink: KeeperActionSink & {
    keeper: Keeper | null;
    pendingSend: Extract<KeeperAction, { kind: "send" }> | null;
    /**
     * The driver's own time for the step timer being armed (the shortcuts above): none,
     * `at` (local), or a held standby's next poll: from its answer (`at`, local) after the
     * answer's lag, the lease's rest and a share of the machine's jitter draw.
     */
    override: "none" | "at" | "held";
    at: number;
    lagUs: number;
    untilFreeUs: number;
    share: number;
    /** the step timer armed by this event (local time), or NaN: armed once the machine's new state is known */
    pendingStep: number;
  } = {
    keeper: null,
    pendingSend: null,
    override: "none",
    at: 0,
    lagUs: 0,
    untilFreeUs: 0,
    share: 0,
    pendingStep: NaN,
    act(action: KeeperAction): void {
      const k = this.keeper!;
      if (action.kind === "send") {
        this.pendingSend = action;
      } else if (action.kind === "report") {
        onReport(k, action.report);
      } else if (action.timer === "step") {
        k.stepEpoch++;
        if (action.atMono !== null)
          this.pendingStep =
            this.override === "none"
              ? action.atMono
              : this.override === "at"
                ? this.at
                : this.at + (this.lagUs + this.untilFreeUs + this.share * standbyJitter(pollUs, lastDraw));
      }
      // The deadline timer: see watchDeadline.
    },
  };

  /**
   * Run one event through `k`'s machine at its host's clock reading `local`, at true time
   * `atUs` (now, or a cruised renew's moment).
   */
  const dispatch = (k: Keeper, event: KeeperEvent, local = k.host.local(), atUs = queue.now): void => {
    // A crashed incarnation's keeper hears nothing more; answers still on their way are lost.
    if (k.host.epoch !== k.hostEpoch) {
      sink.override = "none";
      return;
    }
    if (k.cruiseAtUs === k.cruiseAtUs) {
      // An event of a cruising keeper: its renews due before now first (they leave `sink`
      // alone: cruiseSink is theirs), then it is queued again.
      catchUp(k);
      endCruise(k);
    }
    clocks.mono = local;
    clocks.wall = local;
    sink.keeper = k;
    k.machine = advanceKeeper(config, k.machine, event, clocks, sink, true);
    sink.override = "none";
    // Armed after the machine's step (nothing else is scheduled in between): an active
    // keeper's step is a renew, ranked as one.
    const stepAt = sink.pendingStep;
    sink.pendingStep = NaN;
    if (stepAt === stepAt) armStep(k, stepAt, atUs, k.machine.phase === "active");
    const send = sink.pendingSend;
    sink.pendingSend = null;
    if (send !== null) perform(k, send, atUs);
  };

  /** Arm `k`'s step timer at its local time `atLocal`, from true time `nowUs`. */
  const armStep = (k: Keeper, atLocal: number, nowUs = queue.now, renew = false): void => {
    const atUs = Math.max(k.host.trueAt(atLocal), nowUs);
    if (renew && renewedAtOnce === k && mayCruise(k, atUs)) {
      k.cruiseAtUs = atUs;
      cruiserOf[k.shard] = k;
      cruising.add(k);
    } else queueStep(k, atUs, renew);
  };

  const queueStep = (k: Keeper, atUs: number, renew: boolean): void => {
    if (renew) queue.atRenew(atUs, k.uid, k.onStep, k.stepEpoch);
    else queue.at(atUs, k.onStep, k.stepEpoch);
  };

  /**
   * Does `k`'s process run now? Not if it died since (a restarted agent has new keepers);
   * a frozen one's event is put off to its thaw. What SimHost.later does for a closure.
   */
  const awake = (k: Keeper): boolean => {
    const host = k.host;
    if (host.epoch !== k.hostEpoch || !host.up) return false;
    if (host.pausedUntilUs > queue.now) {
      queue.putOff(host.pausedUntilUs);
      return false;
    }
    return true;
  };

  // ---- Cruise (see above) ----

  /** a cruised renew is running: nothing it does may reach the queue or the random sequence */
  let inCruise = false;
  /** the keeper whose renew was just answered with success, at once (the only way into a cruise) */
  let renewedAtOnce: Keeper | null = null;
  const cruiserOf: Array<Keeper | null> = layout.candidates.map(() => null);
  const cruising = new Set<Keeper>();

  /**
   * The barrier ahead of each fault: from there on the renews whose round trip the fault
   * may fall into are queue events (see `request`), so a cruise must end before it.
   */
  const barrierOf = (faultUs: number): number => faultUs - 2 * latencyUs - 1;
  /** The barrier of the first fault after now (a fault at now has run: faults come first). */
  const nextBarrier = (): number => {
    let lo = 0;
    let hi = faultTimesUs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (faultTimesUs[mid]! <= queue.now) lo = mid + 1;
      else hi = mid;
    }
    return lo < faultTimesUs.length ? barrierOf(faultTimesUs[lo]!) : Infinity;
  };

  /**
   * May `k`, whose renew was just answered with success at once, cruise to its next renew
   * at `nextUs`? Only a host running, not frozen, not cut off, on a store that is up, with
   * no message the slow way on the wire, and no fault's barrier before that renew: what
   * the timeline can change, it changes at a fault, and a barrier ends every cruise first.
   */
  const mayCruise = (k: Keeper, nextUs: number): boolean => {
    const host = k.host;
    const now = queue.now;
    return (
      cruise &&
      host.up &&
      !host.paused &&
      !host.cutTo &&
      !host.cutFrom &&
      store.downUntilUs <= now &&
      slowUntilUs <= now &&
      cruiserOf[k.shard] === null &&
      nextUs < nextBarrier()
    );
  };

  /** Run `k`'s cruised renews that come before the event running now, each at its own moment. */
  const catchUp = (k: Keeper, untilUs = queue.now, untilRank = queue.nowRank): void => {
    const rank = EventQueue.renewRank(k.uid);
    let atUs = k.cruiseAtUs;
    if (!(atUs < untilUs || (atUs === untilUs && rank < untilRank))) return;
    inCruise = true;
    do {
      cruiseRenew(k, atUs);
      result.cruisedRenews++;
      queue.ranOutside(1);
      atUs = k.cruiseAtUs;
    } while (atUs < untilUs || (atUs === untilUs && rank < untilRank));
    inCruise = false;
  };

  /** Where a cruised renew's actions go: one send (the renew), the step timer, the renew's report. */
  const cruiseSink = {
    keeper: null as Keeper | null,
    send: null as Extract<KeeperAction, { kind: "send" }> | null,
    stepAt: NaN,
    act(action: KeeperAction): void {
      if (action.kind === "send") this.send = action;
      else if (action.kind === "timer") {
        if (action.timer === "step") {
          this.keeper!.stepEpoch++;
          this.stepAt = action.atMono ?? NaN;
        }
      } else if (action.report.kind !== "renewed")
        throw new CruiseBroken(`reported ${action.report.kind}`, clocks.mono);
    },
  };

  /**
   * `k`'s step timer firing at `atUs` while it cruises: what the queued event does
   * (`onStep`, `dispatch`, `perform`, `request`, the renew's answer), without the parts a
   * cruise makes constant: the host is running, unfrozen and not cut off, the store is up,
   * no fault falls near (the fast path of `request`), the timer is live. The same keeper
   * machine and lease machine, on the same clock readings.
   */
  const cruiseRenew = (k: Keeper, atUs: number): void => {
    const host = k.host;
    const sink = cruiseSink;
    sink.keeper = k;
    sink.send = null;
    sink.stepAt = NaN;
    const local = host.local(atUs);
    clocks.mono = local;
    clocks.wall = local;
    k.machine = advanceKeeper(config, k.machine, STEP, clocks, sink, true);
    const send = sink.send as Extract<KeeperAction, { kind: "send" }> | null;
    if (send === null || send.op !== "renew" || sink.stepAt === sink.stepAt)
      throw new CruiseBroken(`sent ${send?.op ?? "nothing"}`, atUs);
    k.renewAttempt = send.attempt;
    k.renewSent = send.sent;
    if (2 * latencyUs * host.rateNow > send.timeout) throw new CruiseBroken("timed out", atUs);
    const outcome = storeOp(k.shard, k.renewOp!, atUs + latencyUs, true);
    if (!outcome.ok) throw new CruiseBroken("been refused", atUs);
    const answeredLocal = host.local(atUs + 2 * latencyUs);
    clocks.mono = answeredLocal;
    clocks.wall = answeredLocal;
    const event = { kind: "renewed", attempt: k.renewAttempt, sent: k.renewSent, outcome } as const;
    sink.send = null;
    k.machine = advanceKeeper(config, k.machine, event, clocks, sink, true);
    if (sink.send !== null || sink.stepAt !== sink.stepAt || k.machine.phase !== "active")
      throw new CruiseBroken("armed no next renew", atUs);
    k.cruiseAtUs = Math.max(host.trueAt(sink.stepAt), atUs);
  };

  /** Queue `k`'s next renew again. */
  const endCruise = (k: Keeper): void => {
    const atUs = k.cruiseAtUs;
    if (atUs !== atUs) return;
    k.cruiseAtUs = NaN;
    cruiserOf[k.shard] = null;
    cruising.delete(k);
    queueStep(k, atUs, true);
  };

  /** Before a fault: every cruise ends (the barrier is the driver's event, not the model's). */
  for (const faultUs of new Set(faultTimesUs))
    queue.atFirst(barrierOf(faultUs), () => {
      queue.uncount();
      for (const k of [...cruising]) {
        catchUp(k);
        endCruise(k);
      }
    });

  const onReport = (k: Keeper, report: KeeperReport): void => {
    if (report.kind === "active") {
      k.leaseEpoch++;
      const op = { kind: "renew", agent: k.host.id, token: report.token, ttlMs } as const;
      k.renewOp = op;
      k.renewCalls = renewCallsFor(k, op);
      store.waiters.get(k.shard)?.delete(k);
      believe(k);
      scheduleWrite(k, random() * writeUs); // its periodic work has its own phase
    } else if (report.kind === "lost") {
      k.leaseEpoch++;
      disbelieve(k, queue.now);
    }
  };

  /** The machine's deadline timer firing now, if its time has come (within clock slack). */
  const fireDeadlineIfDue = (k: Keeper): void => {
    catchUp(k);
    const local = k.host.local();
    const deadline = k.machine.deadlineMono;
    if (k.machine.phase === "active" && local >= deadline - CLOCK_SLACK_US)
      dispatch(k, DEADLINE, Math.max(local, deadline));
  };

  /**
   * The deadline is the agent's own clock: it ends the belief even in a frozen process.
   * A running agent needs no extra event for it (its renew times out at the deadline); a
   * frozen one, or one whose clock changes pace, gets this watch.
   */
  const watchDeadline = (k: Keeper): void => {
    // A crashed incarnation's keeper is watched no more (its host may be frozen again later).
    if (k.host.epoch !== k.hostEpoch) return;
    const epoch = k.leaseEpoch;
    queue.at(k.host.trueAt(k.machine.deadlineMono), () => {
      catchUp(k);
      if (k.leaseEpoch !== epoch || k.host.epoch !== k.hostEpoch || k.machine.phase !== "active") return;
      fireDeadlineIfDue(k);
      if (k.machine.phase === "active" && k.host.paused) watchDeadline(k); // still frozen: check again at the new deadline
    });
  };

  const perform = (k: Keeper, send: Extract<KeeperAction, { kind: "send" }>, atUs: number): void => {
    if (send.op === "acquire") {
      if (send.waitMs > 0 && waitAcquire(k, send, atUs)) return;
      return request(k.host, atUs, k.acquireCalls, send.attempt, send.sent, send.timeout);
    }
    if (send.op === "release") {
      const { token } = send;
      return toStore(k.host, (atUs) => {
        const released = storeOp(k.shard, { kind: "release", agent: k.host.id, token }, atUs);
        if (released.ok) wakeWaiters(k.shard, atUs);
      });
    }
    k.renewAttempt = send.attempt;
    k.renewSent = send.sent;
    request(k.host, atUs, k.renewCalls!, send.attempt, send.sent, send.timeout);
  };

  /** The acquire handlers of `k`: one set per keeper, not per poll. */
  const acquireCallsFor = (k: Keeper): RequestCalls<LeaseOutcome> => {
    const op = { kind: "acquire", agent: k.host.id, ttlMs } as const;
    return {
      apply: (atUs) => storeOp(k.shard, op, atUs),
      settle: (outcome) => (outcome.ok ? "on-arrival" : "now"),
      onAnswer: (outcome, attempt, sent, nowUs, lagUs) => {
        const arrivedLocal = k.host.local(nowUs + lagUs);
        if (
          !outcome.ok &&
          outcome.current !== null &&
          k.machine.phase === "standby" &&
          config.waitMs === undefined
        ) {
          // Held: skip the polls that could only be refused (see above).
          let waiting = store.waiters.get(k.shard);
          if (waiting === undefined) store.waiters.set(k.shard, (waiting = new Set()));
          waiting.add(k);
          // `lagUs` is how far the answer still is from now: the poll counts from its arrival.
          sink.override = "held";
          sink.at = k.host.local(nowUs);
          sink.share = random();
          sink.lagUs = lagUs;
          sink.untilFreeUs = (outcome.current.ttlMs + 1) * MS;
        }
        dispatch(k, { kind: "acquired", attempt, sent, outcome }, arrivedLocal);
      },
      onTimeout: (attempt) =>
        dispatch(k, { kind: "failed", attempt, op: "acquire", error: "no answer in time" }),
    };
  };

  /** The renew handlers of `k`'s current lease: one set per lease, not per renew. */
  const renewCallsFor = (k: Keeper, op: RenewOperation): RequestCalls<LeaseOutcome> => {
    const epoch = k.leaseEpoch;
    return {
      apply: (atUs) => storeOp(k.shard, op, atUs, true),
      settle: (outcome) => (outcome.ok ? "now" : "on-arrival"),
      // What differs per renew is read off the keeper (the renew in flight), not the arguments.
      onAnswer: (outcome, _attempt, _sent, nowUs, lagUs) => {
        if (k.leaseEpoch !== epoch) return;
        const event = { kind: "renewed", attempt: k.renewAttempt, sent: k.renewSent, outcome } as const;
        // A renew granted at once is the way into a cruise (see armStep).
        renewedAtOnce = outcome.ok ? k : null;
        dispatch(k, event, k.host.local(nowUs + lagUs), nowUs);
        renewedAtOnce = null;
      },
      onTimeout: () => {
        if (k.leaseEpoch !== epoch) return;
        // The renew's timeout is the deadline: it fires first, then the failure is heard.
        fireDeadlineIfDue(k);
        dispatch(k, { kind: "failed", attempt: k.renewAttempt, op: "renew", error: "no answer in time" });
      },
    };
  };

  /**
   * An active agent's periodic fenced write: it checks that its own clock still lets it
   * act, does `write_work_ms` of work, and sends the write with its token. A freeze during
   * the work delays the send past the check: the classic stale write fencing is for.
   */
  const scheduleWrite = (k: Keeper, delayUs = writeUs) =>
    queue.at(k.host.trueAt(k.host.local() + delayUs), k.onWriteCheck, k.leaseEpoch);

  const writeCheck = (k: Keeper, leaseEpoch: number): void => {
    if (!awake(k)) return;
    catchUp(k);
    if (k.leaseEpoch !== leaseEpoch || k.machine.phase !== "active") return;
    const local = k.host.local();
    if (mayAct(k.machine, local, local))
      queue.at(k.host.trueAt(local + workUs), k.onWriteSend, k.machine.token!);
    scheduleWrite(k);
  };

  const send = (k: Keeper, token: number) =>
    toStore(k.host, (atUs) => {
      const fenced = storeOp(k.shard, { kind: "fence", token }, atUs);
      if (fenced.allowed) {
        // Held against the store's own record: a pass for anyone but the live holder is a safety failure.
        const live = store.shards.get(k.shard)?.lease;
        if (live?.token !== token || live.holder !== k.host.id || live.expiresAtUs <= atUs)
          result.staleWritesAccepted++;
      } else result.staleWritesRefused++;
    });

  const startAgent = (host: SimHost, warm: boolean) => {
    host.start();
    keepersOf[host.index] = [];
    for (let s = 0; s < layout.candidates.length; s++) {
      if (!layout.candidates[s]!.includes(host.index)) continue;
      const k: Keeper = {
        host,
        shard: s,
        uid: host.index * layout.candidates.length + s,
        hostEpoch: host.epoch,
        machine: initialKeeperState(config),
        stepEpoch: 0,
        leaseEpoch: 0,
        renewCalls: null,
        renewOp: null,
        renewAttempt: 0,
        renewSent: NEVER_SENT,
        cruiseAtUs: NaN,
        acquireCalls: null!,
        onStep: (stepEpoch) => {
          if (awake(k) && k.stepEpoch === stepEpoch) dispatch(k, STEP);
        },
        onWriteCheck: (leaseEpoch) => writeCheck(k, leaseEpoch),
        onWriteSend: (token) => {
          if (awake(k)) send(k, token);
        },
      };
      k.acquireCalls = acquireCallsFor(k);
      keepersOf[host.index]!.push(k);
      if (!warm) {
        dispatch(k, START);
        continue;
      }
      if (layout.candidates[s]![0] === host.index) {
        // Steady state at time 0: the first candidate holds the lease.
        const outcome = storeOp(s, { kind: "acquire", agent: host.id, ttlMs }, queue.now);
        if (outcome.ok) {
          // A holder in steady state renews at some phase of its interval, not in step with the others.
          const local = host.local();
          sink.override = "at";
          sink.at = host.local() + random() * intervalUs;
          dispatch(k, { kind: "acquired", attempt: 0, sent: { mono: local, wall: local }, outcome }, local);
          continue;
        }
      }
      armStep(k, host.local() + jitter(pollUs)); // a standby somewhere in its poll cycle
    }
  };

  const stopAgent = (host: SimHost, graceful: boolean) => {
    if (!host.up) return;
    for (const k of keepersOf[host.index] ?? []) {
      store.waiters.get(k.shard)?.delete(k);
      leaveWaits(k);
      if (k.machine.phase !== "active") continue;
      // An active keeper is counted as managing until it loses or stops: here it stops.
      disbelieve(k, queue.now);
      // SIGTERM: the machine hands the lease back (a frozen process sends nothing).
      if (graceful && !host.paused) dispatch(k, STOP);
    }
    host.crash();
  };

  const wakeWaiters = (shard: number, atUs: number) => {
    if (waits.has(shard)) stepShardWaits(shard, { kind: "wake" }, atUs);
    const waiting = store.waiters.get(shard);
    if (waiting === undefined) return;
    for (const w of [...waiting]) {
      const share = random();
      w.stepEpoch++;
      armStep(w, w.host.local() + share * jitter(pollUs));
    }
    waiting.clear();
  };

  // ---- Waiting acquires (fleet.standby_wait_ms) ----
  //
  // The bridge's side of a waiting acquire, by the rules the bridge runs (lease/waits.ts),
  // on this clock. The bridge sits with the store here: its tries are store operations
  // stamped with the moment they happen (a release's wake: the release's own stamp), and
  // its answers take one latency back to the agent. Only on the fast path (see `request`):
  // with a fault near, the link cut or the store down, the acquire goes as a plain one and
  // is answered at once, as a bridge that cannot wait answers, and the agent polls.

  interface SimWaiter {
    k: Keeper;
    attempt: number;
    sent: SentAt;
    hostEpoch: number;
    arrivedUs: number;
    triedUs: number;
  }
  const waits = new Map<number, { state: ShardWaits<SimWaiter>; timerEpoch: number }>();
  const acquireOpOf = (k: Keeper) => ({ kind: "acquire", agent: k.host.id, ttlMs }) as const;

  /** The bridge's answer to `w`, sent at `atUs`: it reaches the agent a latency later, unless the link is cut. */
  const answerWaiter = (w: SimWaiter, outcome: LeaseOutcome, atUs: number): void => {
    const { k } = w;
    const waitedMs = Math.floor(((outcome.ok ? w.triedUs : atUs) - w.arrivedUs) / MS);
    k.host.later(atUs + latencyUs, () => {
      if (k.host.epoch !== w.hostEpoch || k.host.cutFrom) return; // lost: the agent times out
      dispatch(k, { kind: "acquired", attempt: w.attempt, sent: w.sent, outcome, waitedMs });
    });
  };

  const stepShardWaits = (shard: number, event: WaitEvent<SimWaiter>, atUs: number): void => {
    let entry = waits.get(shard);
    if (entry === undefined) {
      if (event.kind !== "park") return;
      waits.set(shard, (entry = { state: noWaits(), timerEpoch: 0 }));
    }
    const step = stepWaits(entry.state, event, atUs, MS);
    entry.state = step.state;
    let trying: SimWaiter | null = null;
    for (const action of step.actions) {
      if (action.kind === "try") trying = action.waiter;
      else performWait(shard, entry, action, atUs);
    }
    if (trying !== null) {
      trying.triedUs = atUs;
      if (store.downUntilUs > atUs) stepShardWaits(shard, { kind: "failed" }, atUs);
      else
        stepShardWaits(shard, { kind: "tried", outcome: storeOp(shard, acquireOpOf(trying.k), atUs) }, atUs);
    }
    if (idle(entry.state) && waits.get(shard) === entry) waits.delete(shard);
  };

  const performWait = (
    shard: number,
    entry: { timerEpoch: number },
    action: Exclude<WaitAction<SimWaiter>, { kind: "try" }>,
    atUs: number,
  ): void => {
    if (action.kind === "answer") return answerWaiter(action.waiter, action.outcome, atUs);
    if (action.kind === "give-back") {
      const released = storeOp(
        shard,
        { kind: "release", agent: action.waiter.k.host.id, token: action.token },
        atUs,
      );
      if (released.ok) queue.at(atUs, () => wakeWaiters(shard, queue.now));
      return;
    }
    const epoch = ++entry.timerEpoch;
    if (action.at !== null)
      queue.at(Math.max(action.at, queue.now), () => {
        if (waits.get(shard) === entry && entry.timerEpoch === epoch)
          stepShardWaits(shard, { kind: "wake" }, queue.now);
      });
  };

  /** A waiting acquire of `k`, when the fast path takes it; false: send it as a plain one. */
  const waitAcquire = (
    k: Keeper,
    send: Extract<KeeperAction, { kind: "send"; op: "acquire" }>,
    atUs: number,
  ): boolean => {
    const host = k.host;
    const arrivedUs = atUs + latencyUs;
    if (host.cutTo || !fastPath(atUs) || store.downUntilUs > arrivedUs) return false;
    const waiter: SimWaiter = {
      k,
      attempt: send.attempt,
      sent: send.sent,
      hostEpoch: host.epoch,
      arrivedUs,
      triedUs: arrivedUs,
    };
    const first = storeOp(k.shard, acquireOpOf(k), arrivedUs);
    if (first.ok || (first.reason !== "held" && first.reason !== "recovering")) {
      answerWaiter(waiter, first, arrivedUs);
      return true;
    }
    stepShardWaits(k.shard, { kind: "park", waiter, refusal: first }, arrivedUs);
    // The end of its wait: a plain acquire's answer, if it still waits.
    queue.at(arrivedUs + send.waitMs * MS, () => {
      if (!(waits.get(k.shard)?.state.queue.includes(waiter) ?? false)) return;
      stepShardWaits(k.shard, { kind: "leave", waiter }, queue.now);
      if (store.downUntilUs > queue.now) return; // no answer: the agent times out
      waiter.triedUs = queue.now;
      answerWaiter(waiter, storeOp(k.shard, acquireOpOf(k), queue.now), queue.now);
    });
    return true;
  };

  /** `k`'s host is gone: its waiting acquire leaves (a real client's connection closes). */
  const leaveWaits = (k: Keeper): void => {
    const entry = waits.get(k.shard);
    if (entry === undefined) return;
    for (const waiter of entry.state.queue)
      if (waiter.k === k) stepShardWaits(k.shard, { kind: "leave", waiter }, queue.now);
  };

  for (const host of hosts) startAgent(host, true);

  const faults: ShardFaults = {
    crash: (h) => stopAgent(h, false),
    stop: (h) => stopAgent(h, true),
    start: (h) => {
      if (h.up) stopAgent(h, false);
      startAgent(h, false);
    },
    pause: (h, untilUs) => {
      if (!h.freeze(untilUs)) return;
      for (const k of keepersOf[h.index] ?? []) if (k.machine.phase === "active") watchDeadline(k);
    },
    redisRestart: (downUs) => {
      store.shards = new Map();
      store.waiters = new Map();
      store.downUntilUs = queue.now + downUs;
      store.bootUs = queue.now + downUs;
      // A restarted Redis has a new replication id too (it continues no one).
      if (store.lineage !== undefined) store.lineage = { id: `restart-${++store.lineages}`, promoted: false };
      // Standbys that were told "held" would come back at that lease's end: they do, and
      // find the store recovering or empty, as real standbys do.
    },
    replicaStops: () => {
      // A copy: the master's states go on being renewed in place (see storeOp).
      store.replica = new Map(
        [...store.shards].map(([shard, state]) => [
          shard,
          { ...state, lease: state.lease === null ? null : { ...state.lease } },
        ]),
      );
    },
    redisFailover: (downUs) => {
      // The promoted replica has what it had when it stopped following: the writes of
      // the last `lag` are lost. Its new replication id, and its being promoted, are what
      // the lease rules see (lineageHold): every shard is held for a TTL from its first
      // operation, since a holder may be acting on a lost renew.
      store.shards = store.replica ?? store.shards;
      store.replica = null;
      store.waiters = new Map();
      store.downUntilUs = queue.now + downUs;
      store.lineage = { id: `promoted-${++store.lineages}`, promoted: true };
    },
    clockRate: (h, rate) => {
      h.setRate(rate);
      for (const k of keepersOf[h.index] ?? []) if (k.machine.phase === "active") watchDeadline(k);
    },
  };
  /** Run the cruised renews due by the end of the run (the queue runs its events up to and at the end). */
  const finish = (endUs: number): void => {
    for (const k of cruising) catchUp(k, endUs, Infinity);
  };
  return { result, faults, finish };
}

/** What the timeline can do to the shard side. */
export interface ShardFaults {
  crash(host: SimHost): void;
  /** SIGTERM: leases handed back */
  stop(host: SimHost): void;
  start(host: SimHost): void;
  pause(host: SimHost, untilUs: number): void;
  redisRestart(downUs: number): void;
  /** the replica to be promoted at the next failover stops following the master */
  replicaStops(): void;
  /** the master is lost; the replica is promoted, and reached after `downUs` */
  redisFailover(downUs: number): void;
  clockRate(host: SimHost, rate: number): void;
}
