import { LeaseKeeper, type LeaseClient, type WaitedLeaseOutcome } from "../../core/keeper/lease-keeper.js";
import type { FleetLayout } from "./fleet.js";
import type { SimHost } from "./host.js";
import { clockChanged, simScheduler } from "./keeper-scheduler.js";
import { SimNetwork, type RequestCalls } from "./network.js";
import type { EventQueue } from "./queue.js";
import { fleetTimesUs, type Scenario } from "./scenario.js";
import { ShardActivity, type ShardsModeResult } from "./shard-activity.js";
import { shardFaults, type ShardFaults } from "./shard-faults.js";
import { SimStore } from "./shard-store.js";
import { StandbyWaits, type HearWaited } from "./standby-waits.js";

const MS = 1000;
const NEVER_SENT = { mono: 0, wall: 0 };
const ON_ARRIVAL = () => "on-arrival" as const;
const IGNORE = () => undefined;

/** One agent's shipped LeaseKeeper for one shard, and what the driver keeps beside it. */
interface ShippedKeeper {
  readonly host: SimHost;
  readonly shard: number;
  /** the host's incarnation it belongs to: a restarted agent has new keepers */
  readonly hostEpoch: number;
  readonly keeper: LeaseKeeper;
  /** bumped when it wins or loses a lease: an older lease's write loop stops */
  leaseEpoch: number;
}

/**
 * How long the shipped keepers run before time 0: every shard's first candidate started
 * somewhere in one renew interval (so holders renew at their own phases) and granted,
 * every standby started after that and standing by — the steady state the simulator's own
 * driver begins in.
 */
export function shippedWarmUpUs(scenario: Scenario): number {
  const { intervalUs, pollUs, latencyUs } = fleetTimesUs(scenario);
  return 2 * intervalUs + pollUs + 8 * latencyUs;
}

/**
 * Shards with leases, each agent's keepers the shipped `LeaseKeeper` (src/core/keeper/lease-keeper.ts)
 * — its step and deadline timers, the timeout on each request, the release on stop — on
 * the simulator's clock (`simScheduler`), over the same store (SimStore), links
 * (SimNetwork), faults and waiting acquires (StandbyWaits) as the simulator's own driver
 * (shards-mode.ts), which runs the same keeper rules with shortcuts a day of faults needs:
 * a standby told "held" polls next at the lease's end, healthy holders cruise, and the
 * deadline is a timer only on a frozen host. Here nothing is skipped: every poll, timer and
 * answer is an event, and the keepers hear their answers through promises, so the run
 * settles them between events (`runSettled`). Slower; test/process/simulate.test.ts holds both
 * drivers to the same bounds. What those catch of a broken LeaseKeeper, tried: no release
 * on stop, no deadline check in `token()`, timers off by 3x, a step timer never armed,
 * requests that never time out; test/unit/simulate-keeper.test.ts the deadline timer and the
 * timeouts' length one by one.
 *
 * The keepers start cold when `queue` starts, and `originUs` (shippedWarmUpUs) later —
 * the scenario's time 0 — the books open on whoever holds a lease. Coverage follows the
 * keepers' own reports (`active`, `lost`), and `token()` where the driver must ask: before
 * each fenced write, as an agent does, and at a frozen (or re-clocked) holder's deadline —
 * the first thing the process does when it runs again, and its answer then.
 */
export function runShippedKeepers(
  scenario: Scenario,
  layout: FleetLayout,
  queue: EventQueue,
  random: () => number,
  hosts: SimHost[],
  /** the run's clock at the scenario's time 0: the keepers warm up before it (shippedWarmUpUs) */
  originUs: number,
  /** when the timeline's faults happen (the run's clock), sorted: the round trips they fall into run as events */
  faultTimesUs: readonly number[],
): { result: ShardsModeResult; faults: ShardFaults } {
  const { fleet } = scenario;
  const { ttlMs, intervalUs, latencyUs, pollUs, writeUs, workUs } = fleetTimesUs(scenario);

  const store = new SimStore(scenario.timeline.some((fault) => fault.fault === "redis-failover"));
  const network = new SimNetwork(queue, store, latencyUs, faultTimesUs);
  const activity = new ShardActivity<ShippedKeeper>(layout.shardWeights, originUs);
  const result = activity.result;
  const keepersOf: ShippedKeeper[][] = hosts.map(() => []);
  const waits: StandbyWaits<ShippedKeeper> = new StandbyWaits(queue, store, network, ttlMs, (shard, atUs) =>
    waits.wake(shard, atUs),
  );
  /** the books open at the scenario's time 0, after the warm-up */
  let counting = false;

  /** What a keeper's requests reach: the store, over its host's link, answered as the bridge would. */
  const clientOf = (host: SimHost, shard: number, self: () => ShippedKeeper): LeaseClient => {
    const call = <T>(apply: (atUs: number) => T): Promise<T> =>
      new Promise((resolve) => {
        // An answer that comes back once the host was restarted (a fault inside the round
        // trip sends it the slow way) is not this process's: the one that asked is dead.
        const epoch = host.epoch;
        const calls: RequestCalls<T> = {
          apply,
          settle: ON_ARRIVAL,
          onAnswer: (answer) => {
            if (host.epoch === epoch) resolve(answer);
          },
          onTimeout: IGNORE,
        };
        network.request(host, queue.now, calls, 0, NEVER_SENT, Infinity);
      });
    return {
      acquire: ({ agent, ttlMs, waitMs }) => {
        if (waitMs !== undefined && waitMs > 0) {
          let hear: HearWaited = IGNORE;
          const answered = new Promise<WaitedLeaseOutcome>((resolve) => {
            hear = (outcome, waitedMs) => resolve({ ...outcome, waitedMs });
          });
          if (waits.acquire(self(), waitMs, queue.now, hear)) return answered;
        }
        return call((atUs) => store.op(shard, { kind: "acquire", agent, ttlMs }, atUs));
      },
      renew: ({ agent, token, ttlMs }) =>
        call((atUs) => store.op(shard, { kind: "renew", agent, token, ttlMs }, atUs)),
      release: ({ agent, token }) =>
        call((atUs) => {
          const released = store.op(shard, { kind: "release", agent, token }, atUs);
          if (released.ok) waits.wake(shard, atUs);
          return released;
        }),
    };
  };

  /** An active agent's periodic fenced write: asks its keeper for a token, works, sends it. */
  const writeLoop = (k: ShippedKeeper, delayUs: number): void => {
    const epoch = k.leaseEpoch;
    k.host.afterLocal(delayUs, () => {
      if (k.leaseEpoch !== epoch) return;
      const token = k.keeper.token();
      if (token !== null)
        k.host.afterLocal(workUs, () =>
          network.toStore(k.host, (atUs) => {
            const verdict = store.write(k.shard, k.host.id, token, atUs);
            if (counting) activity.write(verdict);
          }),
        );
      if (k.leaseEpoch === epoch) writeLoop(k, writeUs);
    });
  };

  const keeperOf = (host: SimHost, shard: number): ShippedKeeper => {
    const k: ShippedKeeper = {
      host,
      shard,
      hostEpoch: host.epoch,
      leaseEpoch: 0,
      keeper: new LeaseKeeper({
        client: clientOf(host, shard, () => k),
        shard: `shard-${shard}`,
        agent: host.id,
        ttlMs,
        standbyPollMs: fleet.standby_poll_ms,
        ...(fleet.standby_wait_ms > 0 && { waitMs: fleet.standby_wait_ms }),
        scheduler: simScheduler(host),
        random,
      }),
    };
    k.keeper.on("active", () => {
      k.leaseEpoch++;
      if (counting) activity.begin(k, queue.now);
      writeLoop(k, random() * writeUs); // its periodic work has its own phase
    });
    k.keeper.on("lost", () => {
      k.leaseEpoch++;
      activity.end(k, queue.now);
    });
    return k;
  };

  const startAgent = (host: SimHost, warm: boolean): void => {
    host.start();
    const keepers: ShippedKeeper[] = [];
    keepersOf[host.index] = keepers;
    for (let s = 0; s < layout.candidates.length; s++) {
      const candidates = layout.candidates[s]!;
      if (!candidates.includes(host.index)) continue;
      const k = keeperOf(host, s);
      keepers.push(k);
      if (!warm) {
        k.keeper.start();
        continue;
      }
      // Cold, during the warm-up: first candidates within one renew interval, standbys once they hold.
      const startUs =
        candidates[0] === host.index ? random() * intervalUs : intervalUs + 4 * latencyUs + random() * pollUs;
      host.later(queue.now + startUs, () => void k.keeper.start());
    }
  };

  /** `host`'s process is gone: its keepers' open waits close with their connections. */
  const exit = (host: SimHost): void => {
    for (const k of keepersOf[host.index] ?? []) waits.leave(k);
    host.crash();
  };

  /**
   * kill -9, or SIGTERM: an agent stops every keeper (the active hand their leases back, one
   * granted after the stop is released as it arrives) and exits once their releases are
   * answered or timed out. A frozen process is killed: it sends nothing. An active keeper
   * stops acting at the signal either way.
   */
  const stopAgent = (host: SimHost, graceful: boolean): void => {
    if (!host.up) return;
    const keepers = keepersOf[host.index] ?? [];
    for (const k of keepers) {
      if (k.keeper.status !== "active") continue;
      k.leaseEpoch++;
      activity.end(k, queue.now);
    }
    if (!graceful || host.paused) return exit(host);
    const epoch = host.epoch;
    void Promise.all(keepers.map((k) => k.keeper.stop())).then(() => {
      if (host.epoch === epoch) exit(host);
    });
  };

  /**
   * A frozen or re-clocked holder: asked at its deadline, as its first step after the thaw
   * would; asked again should it still hold then (a deadline converted to true time and
   * back can land a float's step short of it) while frozen.
   */
  const watchDeadline = (k: ShippedKeeper): void => {
    const msLeft = k.keeper.msLeft();
    if (msLeft === null) return;
    const host = k.host;
    queue.at(host.trueAt(host.local() + Math.max(msLeft * MS, 1)), () => {
      if (host.epoch === k.hostEpoch && k.keeper.token() !== null && host.paused) watchDeadline(k);
    });
  };
  /** `host` froze, or its clock changed pace. A dead incarnation's keepers are not asked: they run nothing. */
  const watchDeadlines = (host: SimHost): void => {
    for (const k of keepersOf[host.index] ?? []) if (host.epoch === k.hostEpoch) watchDeadline(k);
  };
  /** Its keepers' timers move with its clock, frozen or not (a thaw then finds them at their time). */
  const paceChanged = (host: SimHost): void => {
    clockChanged(host);
    watchDeadlines(host);
  };

  for (const host of hosts) startAgent(host, true);
  // Scheduled before the timeline's faults (`atFirst` keeps their order): the books open
  // ahead of a fault at time 0.
  queue.atFirst(originUs, () => {
    counting = true;
    for (const keepers of keepersOf)
      for (const k of keepers) if (k.keeper.token() !== null) activity.begin(k, originUs);
  });

  const faults = shardFaults(
    { start: startAgent, stop: stopAgent, froze: watchDeadlines, paceChanged },
    store,
    queue,
  );
  return { result, faults };
}
