import type { EventQueue } from "./queue.js";

/**
 * One compute agent's host as the simulator sees it: is the process running, is it frozen
 * (SIGSTOP), can it reach Redis each way, and how fast does its clock run. Work the
 * process schedules goes through `later`, which drops it after a crash and holds it while
 * the process is frozen, as the kernel would.
 */
export class SimHost {
  up = true;
  /** bumped on every crash or stop: work scheduled by an earlier incarnation is dropped */
  epoch = 0;
  pausedUntilUs = 0;
  cutTo = false;
  cutFrom = false;
  /** local clock: anchorLocalUs + (t - anchorUs) * rate */
  private rate = 1;
  private anchorUs = 0;
  private anchorLocalUs = 0;

  constructor(
    readonly index: number,
    readonly id: string,
    private readonly queue: EventQueue,
  ) {}

  /** This host's monotonic clock at true time `t`, µs. */
  local(t = this.queue.now): number {
    return this.anchorLocalUs + (t - this.anchorUs) * this.rate;
  }

  /** The true time at which this host's clock reads `localUs`. */
  trueAt(localUs: number): number {
    return this.anchorUs + (localUs - this.anchorLocalUs) / this.rate;
  }

  get rateNow(): number {
    return this.rate;
  }

  setRate(rate: number): void {
    this.anchorLocalUs = this.local();
    this.anchorUs = this.queue.now;
    this.rate = rate;
  }

  /** A timer of `localDelayUs` on this host's clock. */
  afterLocal(localDelayUs: number, action: () => void): void {
    this.later(this.trueAt(this.local() + localDelayUs), action);
  }

  /**
   * Run `action` at true time `atUs` in this incarnation, after any freeze. `renewOf`: the
   * keeper number when the action is a holder's renew (it is then ranked as one among
   * simultaneous events, see EventQueue.atRenew), or -1.
   */
  later(atUs: number, action: () => void, renewOf = -1): void {
    const epoch = this.epoch;
    const run = (): void => {
      if (this.epoch !== epoch || !this.up) return;
      if (this.pausedUntilUs > this.queue.now) {
        this.schedule(this.pausedUntilUs, run, renewOf);
        return;
      }
      action();
    };
    this.schedule(atUs, run, renewOf);
  }

  private schedule(atUs: number, run: () => void, renewOf: number): void {
    if (renewOf < 0) this.queue.at(atUs, run);
    else this.queue.atRenew(atUs, renewOf, run);
  }

  /** SIGSTOP until `untilUs` (SIGCONT then). A process that is not running is not frozen: false. */
  freeze(untilUs: number): boolean {
    if (!this.up) return false;
    this.pausedUntilUs = Math.max(this.pausedUntilUs, untilUs);
    return true;
  }

  get paused(): boolean {
    return this.pausedUntilUs > this.queue.now;
  }

  crash(): void {
    this.up = false;
    this.epoch++;
    this.pausedUntilUs = 0;
  }

  start(): void {
    this.up = true;
    this.epoch++;
  }
}
