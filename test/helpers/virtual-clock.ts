import type { Clock, TimerHandle } from "../../src/runtime/clock.js";

/** Let the promise work a timer started settle: a few turns of the event loop. */
const settle = async () => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

/**
 * A Clock whose time moves only when the test says: advance() runs each timer due on the
 * way at its own moment, in the order they fall due (then the order they were set), and
 * lets the work it starts settle before the next. A 5 s wait is checked to the millisecond
 * without waiting 5 s, whatever else the machine does.
 */
export class VirtualClock implements Clock {
  private nowMs = 0;
  private nextId = 0;
  private readonly timers = new Map<number, { at: number; run: () => void }>();

  now(): number {
    return this.nowMs;
  }

  set(run: () => void, ms: number): TimerHandle {
    const id = this.nextId++;
    this.timers.set(id, { at: this.nowMs + Math.max(0, ms), run });
    return { timer: id };
  }

  clear(handle: TimerHandle | undefined): void {
    if (handle !== undefined) this.timers.delete(handle.timer as number);
  }

  /** Move the time `ms` on. */
  async advance(ms: number): Promise<void> {
    const end = this.nowMs + ms;
    for (;;) {
      await settle();
      let due: [number, { at: number; run: () => void }] | undefined;
      for (const entry of this.timers)
        if (entry[1].at <= end && (due === undefined || entry[1].at < due[1].at)) due = entry;
      if (due === undefined) break;
      this.timers.delete(due[0]);
      this.nowMs = due[1].at;
      due[1].run();
    }
    this.nowMs = end;
  }
}
