/**
 * What a LeaseKeeper reads time from and sets its timers on: the process's clocks and
 * timers (`realScheduler`), or a simulator's virtual ones (`src/tools/sim/keeper-scheduler.ts`).
 * client-go injects a clock; this injects the timers too, so the keeper's own timer
 * handling — its step and deadline timers, the timeout on each request — runs the same
 * on a virtual clock as in an agent.
 */
export interface KeeperScheduler {
  /**
   * Clock units per millisecond: every reading, delay and deadline the keeper takes or
   * gives is in these (1 for `performance.now()`; the simulator counts microseconds). The
   * keeper machine computes in the same units (KeeperConfig.unitsPerMs).
   */
  readonly unitsPerMs: number;
  /** The monotonic clock. */
  monotonicNow(): number;
  /**
   * The wall clock. Only ever makes the agent stop sooner: the monotonic clock does not
   * advance while a host is suspended or a VM is paused, the wall clock does.
   */
  wallNow(): number;
  /** Run `fire` once, `delay` from now by the monotonic clock; the answer cancels it. */
  setTimer(delay: number, fire: () => void): KeeperTimer;
}

/** A timer set on a KeeperScheduler: cancelling one that has fired or was cancelled does nothing. */
export interface KeeperTimer {
  cancel(): void;
}

/** A Node timer behind the KeeperTimer face. */
class NodeTimer implements KeeperTimer {
  private readonly timeout: NodeJS.Timeout;

  constructor(delayMs: number, fire: () => void) {
    this.timeout = setTimeout(fire, delayMs);
  }

  cancel(): void {
    clearTimeout(this.timeout);
  }
}

/**
 * The process's scheduler: `performance.now()`, `Date.now()` and `setTimeout`, or other
 * clock readings (a test's) over the same timers.
 */
export function realScheduler(
  monotonicNow: () => number = () => performance.now(),
  wallNow: () => number = Date.now,
): KeeperScheduler {
  return {
    unitsPerMs: 1,
    monotonicNow,
    wallNow,
    setTimer: (delayMs, fire) => new NodeTimer(delayMs, fire),
  };
}
