import { setFlagsFromString } from "node:v8";

/**
 * Tell V8 not to "pretenure" in a process that simulates. V8 watches, per allocation
 * site, how many of its objects survive a young-generation collection; at the
 * simulator's first collections, while the fleet is being set up, every state object
 * survives, so V8 decides that keeper and lease states are long-lived and from then on
 * allocates them straight in the old space — tens of millions a day, nearly all garbage
 * a moment later, left for the full collector. Measured on the day of faults of
 * test/bench/sim.bench.ts: 86 s of CPU with it, 42 s without (same code, same report).
 * Only the garbage collector's heuristics change, for this process, from now on.
 */
export function tuneHeapForSimulation(): void {
  setFlagsFromString("--no-allocation-site-pretenuring");
}
