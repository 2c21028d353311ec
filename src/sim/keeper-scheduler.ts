import type { KeeperScheduler, KeeperTimer } from "../agent/scheduler.js";
import type { SimHost } from "./host.js";
import type { EventQueue } from "./queue.js";

/** Microseconds per millisecond: the simulator's clocks count microseconds. */
const MS = 1000;

/** A timer on a simulated host: it fires through `SimHost.later`, unless cancelled first. */
class SimTimer implements KeeperTimer {
  private live = true;

  constructor(host: SimHost, delayUs: number, fire: () => void) {
    host.afterLocal(delayUs, () => {
      if (this.live) {
        this.live = false;
        fire();
      }
    });
  }

  cancel(): void {
    this.live = false;
  }
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
