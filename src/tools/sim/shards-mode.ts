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
} from "../../core/keeper/machine.js";
import type { LeaseOperation, LeaseOutcome } from "../../core/lease/machine.js";
import { Cruise, CruiseBroken } from "./cruise.js";
import type { FleetLayout } from "./fleet.js";
import type { SimHost } from "./host.js";
import { SimNetwork, type RequestCalls } from "./network.js";
import type { EventQueue, EventAction } from "./queue.js";
import { fleetTimesUs, type Scenario } from "./scenario.js";
import { shardFaults, type ShardFaults } from "./shard-faults.js";
import { ShardActivity, type ShardsModeResult } from "./shard-activity.js";
import { SimStore } from "./shard-store.js";
import { StandbyWaits } from "./standby-waits.js";

export { CruiseBroken } from "./cruise.js";
export type { ActiveSpell, ShardsModeResult } from "./shard-activity.js";
export type { ShardFaults } from "./shard-faults.js";

const MS = 1000;

type RenewOperation = Extract<LeaseOperation, { kind: "renew" }>;

/**
 * How far apart two readings of one host's clock may be and still be one instant: the
 * float slack of converting a local time to true time and back (`trueAt`, `local`).
 */
const CLOCK_SLACK_US = 1e-6;

/** One agent's lease keeper for one shard: the keeper machine's state and its timers here. */
export interface Keeper {
  host: SimHost;
  shard: number;
  /** this agent-and-shard's number: ranks its renews among simultaneous events (EventQueue.atRenew) */
  uid: number;
  /** the host's incarnation this keeper belongs to: a restarted agent has new keepers */
  hostEpoch: number;
  /** the rules' state (src/core/keeper/machine.ts) */
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
  /** cruising (see Cruise): when its next renew is due, true µs; NaN when its renews are queue events */
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
 * The clock readings the keeper machine gets (KeeperClocks): a host's one clock, and a
 * draw taken from the random sequence only when the rules read it.
 */
export interface SimClocks {
  mono: number;
  wall: number;
  readonly random: number;
}

const STEP: KeeperEvent = { kind: "step" };
const DEADLINE: KeeperEvent = { kind: "deadline" };
const STOP: KeeperEvent = { kind: "stop" };
const START: KeeperEvent = { kind: "start" };
const NEVER_SENT: SentAt = { mono: 0, wall: 0 };

/**
 * Shards with active/passive leases: a store running the pure lease state machine (the
 * same `transition` the memory store runs; expiry judged by the store's clock) and, per
 * agent and shard, the keeper machine the reference agent runs (`advanceKeeper`), fed on
 * each host's own clock in microseconds. This file is what is not the rules: the driver of
 * the keepers (their timers, requests and fenced writes) and the run. The store is
 * SimStore (shard-store.ts), the links to it SimNetwork (network.ts), the timeline's faults
 * shard-faults.ts, the bridge's waiting acquires StandbyWaits (standby-waits.ts), the
 * books ShardActivity (shard-activity.ts), and healthy holders' renews outside the queue
 * Cruise (cruise.ts). shipped-keepers.ts drives the same pieces with the shipped
 * LeaseKeeper and none of the shortcuts below; the tests hold both to the same bounds.
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
 * - a healthy holder cruises: see Cruise.
 */
export function runShardsMode(
  scenario: Scenario,
  layout: FleetLayout,
  queue: EventQueue,
  random: () => number,
  hosts: SimHost[],
  /** when the timeline's faults happen, sorted: the round trips they fall into run as events */
  faultTimesUs: readonly number[],
  /** run healthy holders' renews outside the queue (see Cruise); false: every renew is an event */
  cruiseRenews = true,
): { result: ShardsModeResult; faults: ShardFaults; finish: (endUs: number) => void } {
  const { fleet } = scenario;
  const { ttlMs, intervalUs, latencyUs, pollUs, writeUs, workUs } = fleetTimesUs(scenario);
  const jitter = (us: number) => standbyJitter(us, random());
  const config: KeeperConfig = {
    ttlMs,
    standbyPollMs: fleet.standby_poll_ms,
    unitsPerMs: MS,
    ...(fleet.standby_wait_ms > 0 && { waitMs: fleet.standby_wait_ms }),
  };

  const failsOver = scenario.timeline.some((fault) => fault.fault === "redis-failover");
  const store = new SimStore(failsOver);
  const network = new SimNetwork(queue, store, latencyUs, faultTimesUs);
  const activity = new ShardActivity<Keeper>(layout.shardWeights);
  const result = activity.result;
  const keepersOf: Keeper[][] = hosts.map(() => []);

  const believe = (k: Keeper) => activity.begin(k, queue.now);
  const disbelieve = (k: Keeper, atUs: number) => activity.end(k, atUs);

  /** The clocks the machine reads: the host's, and a draw taken only when the rules use it. */
  let lastDraw = 0;
  const clocks: SimClocks = {
    mono: 0,
    wall: 0,
    get random(): number {
      if (cruise.inCruise) throw new CruiseBroken("drawn from the random sequence", clocks.mono);
      lastDraw = random();
      return lastDraw;
    },
  };
  const cruise = new Cruise(queue, config, clocks, store, network, layout.candidates.length, cruiseRenews);
  store.cruise = cruise;
  network.cruise = cruise;

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
      // alone: the cruise has a sink of its own), then it is queued again.
      cruise.catchUp(k);
      cruise.end(k);
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
    if (renew && cruise.renewedAtOnce === k && cruise.mayCruise(k, atUs)) cruise.begin(k, atUs);
    else if (renew) queue.atRenew(atUs, k.uid, k.onStep, k.stepEpoch);
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
    cruise.catchUp(k);
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
      cruise.catchUp(k);
      if (k.leaseEpoch !== epoch || k.host.epoch !== k.hostEpoch || k.machine.phase !== "active") return;
      fireDeadlineIfDue(k);
      if (k.machine.phase === "active" && k.host.paused) watchDeadline(k); // still frozen: check again at the new deadline
    });
  };

  const perform = (k: Keeper, send: Extract<KeeperAction, { kind: "send" }>, atUs: number): void => {
    if (send.op === "acquire") {
      const { attempt, sent } = send;
      if (
        send.waitMs > 0 &&
        waits.acquire(k, send.waitMs, atUs, (outcome, waitedMs) =>
          dispatch(k, { kind: "acquired", attempt, sent, outcome, waitedMs }),
        )
      )
        return;
      return network.request(k.host, atUs, k.acquireCalls, send.attempt, send.sent, send.timeout);
    }
    if (send.op === "release") {
      const { token } = send;
      return network.toStore(k.host, (atUs) => {
        const released = store.op(k.shard, { kind: "release", agent: k.host.id, token }, atUs);
        if (released.ok) wakeWaiters(k.shard, atUs);
      });
    }
    k.renewAttempt = send.attempt;
    k.renewSent = send.sent;
    network.request(k.host, atUs, k.renewCalls!, send.attempt, send.sent, send.timeout);
  };

  /** The acquire handlers of `k`: one set per keeper, not per poll. */
  const acquireCallsFor = (k: Keeper): RequestCalls<LeaseOutcome> => {
    const op = { kind: "acquire", agent: k.host.id, ttlMs } as const;
    return {
      apply: (atUs) => store.op(k.shard, op, atUs),
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
      apply: (atUs) => store.op(k.shard, op, atUs, true),
      settle: (outcome) => (outcome.ok ? "now" : "on-arrival"),
      // What differs per renew is read off the keeper (the renew in flight), not the arguments.
      onAnswer: (outcome, _attempt, _sent, nowUs, lagUs) => {
        if (k.leaseEpoch !== epoch) return;
        const event = { kind: "renewed", attempt: k.renewAttempt, sent: k.renewSent, outcome } as const;
        // A renew granted at once is the way into a cruise (see armStep).
        cruise.renewedAtOnce = outcome.ok ? k : null;
        dispatch(k, event, k.host.local(nowUs + lagUs), nowUs);
        cruise.renewedAtOnce = null;
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
    cruise.catchUp(k);
    if (k.leaseEpoch !== leaseEpoch || k.machine.phase !== "active") return;
    const local = k.host.local();
    if (mayAct(k.machine, local, local))
      queue.at(k.host.trueAt(local + workUs), k.onWriteSend, k.machine.token!);
    scheduleWrite(k);
  };

  const send = (k: Keeper, token: number) =>
    network.toStore(k.host, (atUs) => activity.write(store.write(k.shard, k.host.id, token, atUs)));

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
        const outcome = store.op(s, { kind: "acquire", agent: host.id, ttlMs }, queue.now);
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
      waits.leave(k);
      if (k.machine.phase !== "active") continue;
      // An active keeper is counted as managing until it loses or stops: here it stops.
      disbelieve(k, queue.now);
      // SIGTERM: the machine hands the lease back (a frozen process sends nothing).
      if (graceful && !host.paused) dispatch(k, STOP);
    }
    host.crash();
  };

  const wakeWaiters = (shard: number, atUs: number) => {
    waits.wake(shard, atUs);
    const waiting = store.waiters.get(shard);
    if (waiting === undefined) return;
    for (const w of [...waiting]) {
      const share = random();
      w.stepEpoch++;
      armStep(w, w.host.local() + share * jitter(pollUs));
    }
    waiting.clear();
  };

  const waits = new StandbyWaits<Keeper>(queue, store, network, ttlMs, (shard, atUs) =>
    wakeWaiters(shard, atUs),
  );

  // Barriers first, as events of the driver's own placed before any of the model's.
  cruise.placeBarriers(faultTimesUs);
  for (const host of hosts) startAgent(host, true);

  /** `host` froze or its clock changed pace: its holders' deadlines get a watch (its step timers are placed in true time as armed). */
  const watchDeadlines = (host: SimHost): void => {
    for (const k of keepersOf[host.index] ?? []) if (k.machine.phase === "active") watchDeadline(k);
  };
  const faults = shardFaults(
    { start: startAgent, stop: stopAgent, froze: watchDeadlines, paceChanged: watchDeadlines },
    store,
    queue,
  );
  /** Run the cruised renews due by the end of the run (the queue runs its events up to and at the end). */
  const finish = (endUs: number): void => {
    cruise.finish(endUs);
    result.cruisedRenews = cruise.renews;
  };
  return { result, faults, finish };
}
