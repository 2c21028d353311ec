/** A store clock: integer microseconds since the epoch. */
export type ClockUs = () => number;

/**
 * Wall-anchored but monotonic within this process: the epoch offset is read once at
 * start and time advances with the monotonic clock, so an NTP step cannot move an
 * embedded store's leases backwards.
 */
export const processClockUs: ClockUs = () => Math.floor((performance.timeOrigin + performance.now()) * 1000);
