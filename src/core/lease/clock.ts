/** A store clock: integer microseconds since the epoch. */
export type ClockUs = () => number;

/**
 * Wall-anchored but monotonic within this process: the epoch offset is read once at
 * start and time advances with the monotonic clock, so an NTP step cannot move an
 * embedded store's leases backwards.
 */
export const processClockUs: ClockUs = () => Math.floor((performance.timeOrigin + performance.now()) * 1000);

/**
 * The wall clock, µs: what the embedded store tells its times in (a lease's `since`, an
 * agent's `last_seen`). The process clock above falls behind it wherever the monotonic
 * clock stops and the wall clock does not (a suspended host; a paused VM whose clock is
 * stepped back into line): 6 s in 13 minutes was seen. Leases are judged by the process
 * clock all the same, so no step of the wall clock moves one.
 */
export const wallClockUs: ClockUs = () => Date.now() * 1000;
