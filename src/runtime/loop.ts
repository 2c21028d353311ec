/**
 * Let the event loop run what is waiting (timers, sockets) before going on. Long loops
 * over pages call it between pages: a store that answers at once (the embedded one)
 * resolves its promises as microtasks, which never let I/O in, and every lease renew
 * waits behind the one event loop.
 */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * How long a long piece of work may hold the event loop before it lets others in. The
 * loop is held for a slice plus the step that ends it (a page: about 1 ms) plus whatever
 * GC falls in it (minor pauses of 2-6 ms with 100,000 nodes in the heap): with pages of
 * 1,000 nodes and 4 ms slices the main thread held it 10-17 ms at a time on a page of
 * 10,000 nodes, with pages of 250 and 2 ms slices 8.6 ms at most (embedded store; read
 * to within a scheduler tick). A yield costs a few microseconds.
 */
export const LOOP_SLICE_MS = 2;

/**
 * Yields to the event loop whenever the work that calls it has held the loop for a
 * slice, however its steps are sized: a page of nodes costs ten times more on one route
 * than on another, and a socket that takes a write at once (loopback, an empty buffer)
 * emits 'drain' on the same turn, so awaiting it lets nothing in.
 */
export class LoopSlicer {
  private since = performance.now();

  constructor(private readonly sliceMs = LOOP_SLICE_MS) {}

  /** Resolves at once while the slice lasts; after it, on a later turn of the loop. */
  async pause(): Promise<void> {
    if (performance.now() - this.since < this.sliceMs) return;
    await yieldToLoop();
    this.since = performance.now();
  }
}
