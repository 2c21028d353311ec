/**
 * The clock and timers a module that waits takes as an argument: the process's own by
 * default, a virtual one in tests, so that a test of a 5 s wait neither waits 5 s nor
 * depends on how busy the machine is.
 */
export interface Clock {
  /** ms, monotonic (performance.now() for the real clock) */
  now(): number;
  /**
   * Call `run` once, `ms` from now; the handle is for clear(). The timer alone never keeps
   * the process running: what waits on it (a socket, a server) does.
   */
  set(run: () => void, ms: number): TimerHandle;
  clear(handle: TimerHandle | undefined): void;
}

/** A timer of a Clock: opaque to its users. */
export type TimerHandle = { readonly timer: unknown };

/** The process's clock: performance.now() and setTimeout. */
export const realClock: Clock = {
  now: () => performance.now(),
  set: (run, ms) => ({ timer: setTimeout(run, ms).unref() }),
  clear: (handle) => {
    if (handle !== undefined) clearTimeout(handle.timer as NodeJS.Timeout);
  },
};
