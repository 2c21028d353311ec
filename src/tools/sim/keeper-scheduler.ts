import type { KeeperScheduler, KeeperTimer } from "../../core/keeper/scheduler.js";
import type { SimHost } from "./host.js";
import type { EventQueue } from "./queue.js";

/** Microseconds per millisecond: the simulator's clocks count microseconds. */
const MS = 1000;

/**
 * How far short of its time a timer may find its host's clock and still fire: the float
 * slack of converting a local time to true time and back.
 */
const CLOCK_SLACK_US = 1e-3;

/** The live timers of each host, so a change of its clock's pace can move them. */
const liveTimers = new WeakMap<SimHost, Set<SimTimer>>();

/**
 * A timer on a simulated host: it fires when the host's clock reads its time, through
 * `SimHost.later` (so a crash drops it and a freeze holds it to the thaw), unless
 * cancelled first. Armed at the true time the host's clock will read it at its pace then;
 * a change of pace moves it (`clockChanged`), as a kernel's monotonic timers follow the
 * clock they are set on.
 */
class SimTimer implements KeeperTimer {
  private live = true;
  /** bumped at each arming: an earlier arming's event does nothing */
  private arming = 0;
  private readonly atLocal: number;
  private readonly epoch: number;

  constructor(
    private readonly host: SimHost,
    delayUs: number,
    private readonly fire: () => void,
  ) {
    this.atLocal = host.local() + delayUs;
    this.epoch = host.epoch;
    let timers = liveTimers.get(host);
    if (timers === undefined) liveTimers.set(host, (timers = new Set()));
    timers.add(this);
    this.arm();
  }

  /** (Re)arm at the true time the host's clock reads `atLocal`, at its pace now; false for a dead incarnation's. */
  arm(): boolean {
    if (!this.live || this.host.epoch !== this.epoch) return false;
    const arming = ++this.arming;
    this.host.later(this.host.trueAt(this.atLocal), () => this.due(arming));
    return true;
  }

  private due(arming: number): void {
    if (!this.live || arming !== this.arming) return;
    // The clock slowed since the arming and moved it: not yet.
    if (this.host.local() < this.atLocal - CLOCK_SLACK_US) return void this.arm();
    this.cancel();
    this.fire();
  }

  cancel(): void {
    this.live = false;
    liveTimers.get(this.host)?.delete(this);
  }
}

/**
 * `host`'s clock changed pace (SimHost.setRate): its keepers' timers move to the true time
 * their local time now falls at. A dead incarnation's timers are dropped.
 */
export function clockChanged(host: SimHost): void {
  const timers = liveTimers.get(host);
  if (timers === undefined) return;
  for (const timer of [...timers]) if (!timer.arm()) timers.delete(timer);
}

/**
 * The scheduler a LeaseKeeper runs on inside the simulator: `host`'s clock (one clock, so
 * its monotonic and wall readings are the same; it runs at the host's rate) and timers on
 * the event queue, which a crash drops and a freeze holds until the thaw, as the kernel
 * would (`SimHost.later`). Microseconds, as the rest of the simulator.
 */
export function simScheduler(host: SimHost): KeeperScheduler {
  return {
    unitsPerMs: MS,
    monotonicNow: () => host.local(),
    wallNow: () => host.local(),
    setTimer: (delayUs, fire) => new SimTimer(host, delayUs, fire),
  };
}

/**
 * Run `queue`'s events up to `untilUs`, letting the promises each one settles run before
 * the next: a LeaseKeeper hears its answers and timeouts through promises, which settle
 * only once the event that resolved them has returned.
 */
export async function runSettled(
  queue: EventQueue,
  untilUs: number,
  onProgress?: (nowUs: number) => void,
): Promise<void> {
  const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
  await settle();
  let sinceReport = 0;
  while (queue.runNext(untilUs)) {
    await settle();
    if (onProgress !== undefined && ++sinceReport === 10_000) {
      sinceReport = 0;
      onProgress(queue.now);
    }
  }
  queue.runUntil(untilUs);
}
