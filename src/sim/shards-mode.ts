import { renewDeadlineMs, renewIntervalMs } from "../domain/lease.js";
import {
  EMPTY_SHARD_STATE,
  transition,
  type LeaseOperation,
  type OutcomeOf,
  type LeaseOutcome,
  type ShardLeaseState,
} from "../lease/machine.js";
import { Coverage } from "./coverage.js";
import type { FleetLayout } from "./fleet.js";
import { SimHost } from "./host.js";
import type { EventQueue } from "./queue.js";
import type { Scenario } from "./scenario.js";

const MS = 1000;

/** One agent's lease keeper for one shard, timed as src/agent/lease-keeper.ts times it. */
interface Keeper {
  host: SimHost;
  shard: number;
  state: "standby" | "active";
  token: number;
  /** this agent's clock reading at which it stops acting on its own */
  deadlineLocal: number;
  /** bumped when the keeper wins or loses a lease: timers of an older lease are dropped */
  leaseEpoch: number;
  /** bumped when a standby's next poll is re-planned */
  pollEpoch: number;
  /** when the renew in flight was sent, by this agent's clock */
  renewSentLocal: number;
  /** the renew's request handlers for the current lease, made once per lease */
  renewCalls: RequestCalls<LeaseOutcome> | null;
}

/** What a request does at the store and with its answer (see `request`). */
interface RequestCalls<T> {
  apply: (atUs: number) => T;
  settle: (answer: T) => "now" | "on-arrival";
  onAnswer: (answer: T, lagUs: number) => void;
  onTimeout: () => void;
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
  staleWritesRefused: number;
  /** writes that passed fencing without being the live holder's: must be 0 */
  staleWritesAccepted: number;
  spells: ActiveSpell[];
}

/**
 * Shards with active/passive leases: a store running the pure lease state machine (the
 * same `transition` the memory store runs; expiry judged by the store's clock) and, per
 * agent and shard, a keeper with the reference agent's timing: renew every TTL/3 after
 * the last renew sent, stop on its own 2/3 TTL after the last renew it sent that
 * succeeded (by its own clock), standbys poll with jitter.
 *
 * One shortcut, stated: a standby's polls that the store could only refuse (the lease is
 * live) are not run one by one; the standby polls again when the lease it was shown would
 * run out, plus a jittered part of its poll interval, and at once (plus jitter) when the
 * holder hands the lease back. The first poll that can succeed happens as it would.
 */
export function runShardsMode(
  scenario: Scenario,
  layout: FleetLayout,
  queue: EventQueue,
  random: () => number,
  hosts: SimHost[],
  /** when the timeline's faults happen, sorted: the round trips they fall into run as events */
  faultTimesUs: readonly number[],
): { result: ShardsModeResult; faults: ShardFaults } {
  const { fleet } = scenario;
  const ttlMs = fleet.lease_ttl_ms;
  const intervalUs = renewIntervalMs(ttlMs) * MS;
  const graceUs = renewDeadlineMs(ttlMs) * MS;
  const latencyUs = fleet.latency_ms * MS;
  const pollUs = fleet.standby_poll_ms * MS;
  const writeUs = fleet.write_interval_ms * MS;
  const workUs = fleet.write_work_ms * MS;
  const jitter = (us: number) => us * (0.5 + 0.5 * random());

  const store = {
    shards: new Map<number, ShardLeaseState>(),
    /** the store process started here (µs); the recovery wait counts from it */
    bootUs: -3_600_000_000,
    downUntilUs: -1,
    waiters: new Map<number, Set<Keeper>>(),
  };
  const coverage = new Coverage(layout.shardWeights, 0);
  const result: ShardsModeResult = {
    coverage,
    staleWritesRefused: 0,
    staleWritesAccepted: 0,
    spells: [],
  };
  const openSpell = new Map<Keeper, ActiveSpell>();
  const keepersOf: Keeper[][] = hosts.map(() => []);

  const storeOp = <Op extends LeaseOperation>(shard: number, op: Op, atUs = queue.now): OutcomeOf<Op> => {
    const state = store.shards.get(shard) ?? EMPTY_SHARD_STATE;
    const step = transition(state, op, { nowUs: atUs, bootUs: store.bootUs });
    store.shards.set(shard, step.state);
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
    apply: (atUs: number) => T,
    timeoutLocalUs: number,
    settle: (answer: T) => "now" | "on-arrival",
    /** `lagUs`: how long after this call the answer really arrives (0 when handled on arrival) */
    onAnswer: (answer: T, lagUs: number) => void,
    onTimeout: () => void,
  ): void => {
    const sentLocal = host.local();
    const sentUs = queue.now;
    // A function declaration, not a closure per request: renews are most of the events.
    function timeout(): void {
      host.later(host.trueAt(sentLocal + timeoutLocalUs), onTimeout);
    }
    if (host.cutTo) return timeout();
    if (fastPath(sentUs)) {
      if (store.downUntilUs > sentUs + latencyUs) return timeout();
      const answer = apply(sentUs + latencyUs);
      if (host.cutFrom || 2 * latencyUs * host.rateNow > timeoutLocalUs) return timeout();
      if (settle(answer) === "now") onAnswer(answer, 2 * latencyUs);
      else host.later(sentUs + 2 * latencyUs, () => onAnswer(answer, 0));
      return;
    }
    slowUntilUs = Math.max(slowUntilUs, sentUs + latencyUs);
    queue.at(sentUs + latencyUs, () => {
      if (store.downUntilUs > queue.now) return timeout();
      const answer = apply(queue.now);
      queue.at(queue.now + latencyUs, () => {
        if (host.cutFrom) return timeout();
        host.later(queue.now, () => {
          if (host.local() - sentLocal > timeoutLocalUs) onTimeout();
          else onAnswer(answer, 0);
        });
      });
    });
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

  const schedulePoll = (k: Keeper, delayUs: number) => {
    const epoch = ++k.pollEpoch;
    k.host.afterLocal(delayUs, () => {
      if (k.pollEpoch === epoch && k.state === "standby") tryAcquire(k);
    });
  };

  const lose = (k: Keeper) => {
    if (k.state !== "active") return;
    k.state = "standby";
    k.leaseEpoch++;
    disbelieve(k, queue.now);
    schedulePoll(k, jitter(pollUs));
  };

  /**
   * The deadline is the agent's own clock: it ends the belief even in a frozen process.
   * A running agent needs no extra event for it: its renew's timeout is the deadline
   * itself (as in the reference agent). A frozen one, or one whose clock changes pace,
   * gets this check.
   */
  const armDeadline = (k: Keeper) => {
    const epoch = k.leaseEpoch;
    const hostEpoch = k.host.epoch;
    queue.at(k.host.trueAt(k.deadlineLocal), () => {
      if (k.leaseEpoch !== epoch || k.host.epoch !== hostEpoch || k.state !== "active") return;
      if (k.host.local() >= k.deadlineLocal - 1e-6) lose(k);
      else if (k.host.paused) armDeadline(k); // still frozen: check again at the new deadline
    });
  };

  /** `firstRenewLocal`: when the first renew goes out (a steady-state start draws its phase) */
  const becomeActive = (
    k: Keeper,
    token: number,
    sentLocal: number,
    firstRenewLocal = sentLocal + intervalUs,
  ) => {
    if (k.host.local() >= sentLocal + graceUs) {
      schedulePoll(k, jitter(pollUs)); // the answer came too late to act on
      return;
    }
    k.state = "active";
    k.token = token;
    k.leaseEpoch++;
    k.deadlineLocal = sentLocal + graceUs;
    k.renewCalls = renewCallsFor(k);
    store.waiters.get(k.shard)?.delete(k);
    believe(k);
    scheduleRenew(k, firstRenewLocal);
    scheduleWrite(k, random() * writeUs); // its periodic work has its own phase
  };

  const tryAcquire = (k: Keeper) => {
    const sentLocal = k.host.local();
    request(
      k.host,
      (atUs) => storeOp(k.shard, { kind: "acquire", agent: k.host.id, ttlMs }, atUs),
      graceUs,
      (outcome) => (outcome.ok ? "on-arrival" : "now"),
      (outcome, lagUs) => {
        if (k.state !== "standby") return;
        if (outcome.ok) return becomeActive(k, outcome.token, sentLocal);
        if (outcome.current !== null) {
          // Held: come back when that lease would run out (or at once, jittered, on a release).
          let waiting = store.waiters.get(k.shard);
          if (waiting === undefined) store.waiters.set(k.shard, (waiting = new Set()));
          waiting.add(k);
          schedulePoll(k, lagUs + (outcome.current.ttlMs + 1) * MS + random() * jitter(pollUs));
        } else {
          schedulePoll(
            k,
            lagUs + Math.min(jitter(pollUs), (outcome.retryAfterMs ?? fleet.standby_poll_ms) * MS),
          );
        }
      },
      () => schedulePoll(k, jitter(pollUs)),
    );
  };

  const scheduleRenew = (k: Keeper, atLocal: number) => {
    const epoch = k.leaseEpoch;
    k.host.later(k.host.trueAt(atLocal), () => {
      if (k.leaseEpoch === epoch && k.state === "active") renew(k);
    });
  };

  /** The renew handlers of `k`'s current lease: one set per lease, not per renew. */
  const renewCallsFor = (k: Keeper): RequestCalls<LeaseOutcome> => {
    const epoch = k.leaseEpoch;
    const op = { kind: "renew", agent: k.host.id, token: k.token, ttlMs } as const;
    return {
      apply: (atUs) => storeOp(k.shard, op, atUs),
      settle: (outcome) => (outcome.ok ? "now" : "on-arrival"),
      onAnswer: (outcome) => {
        if (k.leaseEpoch !== epoch || k.state !== "active") return;
        if (!outcome.ok) return lose(k);
        k.deadlineLocal = k.renewSentLocal + graceUs;
        scheduleRenew(k, k.renewSentLocal + intervalUs);
      },
      onTimeout: () => {
        // The renew's timeout is the deadline: no answer by then, and the agent stops.
        if (k.leaseEpoch !== epoch || k.state !== "active") return;
        if (k.host.local() >= k.deadlineLocal - 1e-6) lose(k);
        else scheduleRenew(k, k.host.local() + Math.max(50 * MS, intervalUs / 4));
      },
    };
  };

  const renew = (k: Keeper) => {
    const sentLocal = k.host.local();
    if (sentLocal >= k.deadlineLocal) return lose(k);
    k.renewSentLocal = sentLocal;
    const calls = k.renewCalls!;
    request(k.host, calls.apply, k.deadlineLocal - sentLocal, calls.settle, calls.onAnswer, calls.onTimeout);
  };

  /**
   * An active agent's periodic fenced write: it checks that its own clock still lets it
   * act, does `write_work_ms` of work, and sends the write with its token. A freeze during
   * the work delays the send past the check: the classic stale write fencing is for.
   */
  const scheduleWrite = (k: Keeper, delayUs = writeUs) => {
    const epoch = k.leaseEpoch;
    k.host.afterLocal(delayUs, () => {
      if (k.leaseEpoch !== epoch || k.state !== "active") return;
      if (k.host.local() < k.deadlineLocal) {
        const token = k.token;
        k.host.afterLocal(workUs, () => send(k, token));
      }
      scheduleWrite(k);
    });
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
        state: "standby",
        token: 0,
        deadlineLocal: 0,
        leaseEpoch: 0,
        pollEpoch: 0,
        renewSentLocal: 0,
        renewCalls: null,
      };
      keepersOf[host.index]!.push(k);
      if (warm && layout.candidates[s]![0] === host.index) {
        // Steady state at time 0: the first candidate holds the lease.
        const outcome = storeOp(s, { kind: "acquire", agent: host.id, ttlMs });
        if (outcome.ok) {
          // A holder in steady state renews at some phase of its interval, not in step with the others.
          becomeActive(k, outcome.token, host.local(), host.local() + random() * intervalUs);
          continue;
        }
      }
      schedulePoll(k, warm ? jitter(pollUs) : 0);
    }
  };

  const stopAgent = (host: SimHost, graceful: boolean) => {
    if (!host.up) return;
    for (const k of keepersOf[host.index] ?? []) {
      store.waiters.get(k.shard)?.delete(k);
      if (k.state !== "active") continue;
      // An active keeper is counted as managing until it loses or stops: here it stops.
      disbelieve(k, queue.now);
      if (graceful && !host.paused) {
        const { token } = k;
        toStore(host, (atUs) => {
          const released = storeOp(k.shard, { kind: "release", agent: host.id, token }, atUs);
          if (released.ok) wakeWaiters(k.shard);
        });
      }
      k.state = "standby";
    }
    host.crash();
  };

  const wakeWaiters = (shard: number) => {
    const waiting = store.waiters.get(shard);
    if (waiting === undefined) return;
    for (const w of [...waiting]) schedulePoll(w, random() * jitter(pollUs));
    waiting.clear();
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
      h.pausedUntilUs = Math.max(h.pausedUntilUs, untilUs);
      for (const k of keepersOf[h.index] ?? []) if (k.state === "active") armDeadline(k);
    },
    redisRestart: (downUs) => {
      store.shards = new Map();
      store.waiters = new Map();
      store.downUntilUs = queue.now + downUs;
      store.bootUs = queue.now + downUs;
      // Standbys that were told "held" would come back at that lease's end: they do, and
      // find the store recovering or empty, as real standbys do.
    },
    clockRate: (h, rate) => {
      h.setRate(rate);
      for (const k of keepersOf[h.index] ?? []) if (k.state === "active") armDeadline(k);
    },
  };
  return { result, faults };
}

/** What the timeline can do to the shard side. */
export interface ShardFaults {
  crash(host: SimHost): void;
  /** SIGTERM: leases handed back */
  stop(host: SimHost): void;
  start(host: SimHost): void;
  pause(host: SimHost, untilUs: number): void;
  redisRestart(downUs: number): void;
  clockRate(host: SimHost, rate: number): void;
}
