import type { LeaseOutcome, LeaseView } from "./machine.js";

/**
 * The rules of a waiting acquire, pure: the standbys of one shard that asked for its lease
 * with a wait and were refused, parked until the lease can change hands. (state, event,
 * now) -> (state, actions); the bridge (src/bridge/shards/lease-waits.ts) drives them with real
 * timers and the store, and turns the answers into HTTP answers.
 *
 * A lease changes hands when it is released (this bridge hears it; the others through
 * the store's announcement), when it expires (no one announces that: the waiters' wake
 * timer is set to the lease's end as the refusal showed it), or when it is taken back.
 * At a wake one acquire is tried, for the first waiter: granted, it is answered with the
 * lease, and every other waiter with a refusal naming the new holder; refused under the
 * same lease (a renew moved its end, an announcement of an older one), they wait on, the
 * timer set to the lease's new end; refused under another lease (another bridge's waiter
 * won), every waiter hears who holds it. A renew the driver sees (one through its own
 * bridge) moves the timer to the lease's new end without an acquire; a renew elsewhere is
 * found by the acquire at the old end. One acquire per wake, whatever the number of
 * waiters: the store sees no poll. The others come back with a new wait: O(1) requests
 * per standby per change of holder.
 */

/** Times in the driver's clock units (see stepWaits). */
export interface ShardWaits<W> {
  /** parked waiters, first come first tried */
  readonly queue: readonly W[];
  /** the token of the lease they wait behind, 0 when none is live (the store recovering) */
  readonly behind: number;
  /** when the wake timer fires, or null */
  readonly wakeAt: number | null;
  /** the waiter whose acquire is in flight, or null */
  readonly trying: W | null;
  /** a wake came while an acquire was in flight: its answer may predate the change */
  readonly wokenMeanwhile: boolean;
}

/** A refusal of an acquire, as the store gives it. */
export type Refusal = Extract<LeaseOutcome, { ok: false }>;

export type WaitEvent<W> =
  /** `waiter`'s own acquire was refused: it waits from now */
  | { kind: "park"; waiter: W; refusal: Refusal }
  /** the lease was released (here, or announced by another bridge), or the wake timer fired */
  | { kind: "wake" }
  /** the acquire in flight was answered */
  | { kind: "tried"; outcome: LeaseOutcome }
  /** the acquire in flight failed (the store unreachable, the waiter no longer allowed) */
  | { kind: "failed" }
  /** `waiter` stops waiting: its client went away, or its wait ended */
  | { kind: "leave"; waiter: W }
  /** the lease was renewed where the driver saw it (through this bridge): its new end */
  | { kind: "renewed"; lease: LeaseView };

export type WaitAction<W> =
  /** try to acquire the lease for `waiter`, and answer with `tried` or `failed` */
  | { kind: "try"; waiter: W }
  /** answer `waiter` with `outcome`: it waits no more */
  | { kind: "answer"; waiter: W; outcome: LeaseOutcome }
  /** a lease granted to a waiter that left meanwhile: release it, so that the next is granted */
  | { kind: "give-back"; waiter: W; token: number }
  /** (re)arm the wake timer at `at`, or cancel it (null) */
  | { kind: "timer"; at: number | null };

/** After a failed try, the next one this much later. */
export const RETRY_AFTER_FAILURE_MS = 100;

export function noWaits<W>(): ShardWaits<W> {
  return { queue: [], behind: 0, wakeAt: null, trying: null, wokenMeanwhile: false };
}

/** Whether nothing is left to keep for the shard: no waiter, no try in flight, no timer. */
export const idle = <W>(s: ShardWaits<W>): boolean =>
  s.queue.length === 0 && s.trying === null && s.wakeAt === null;

/** The lease it would be after a grant, as a refusal names it to the others. */
const heldBy = (lease: LeaseView): Refusal => ({ ok: false, reason: "held", current: lease });

/** When to look again behind a refusal: the lease's end (+1 ms: the store's clock rounds down), or the store's recovery wait. */
function nextLook(refusal: Refusal, now: number, units: number): number {
  if (refusal.current !== null) return now + (refusal.current.ttlMs + 1) * units;
  return now + Math.max(1, refusal.retryAfterMs ?? RETRY_AFTER_FAILURE_MS) * units;
}

/**
 * One event through the rules. `now` and every time in the state and actions are in the
 * driver's clock units, `unitsPerMs` of them to a millisecond (1: the bridge's
 * milliseconds; the simulator's microseconds, 1000).
 */
export function stepWaits<W>(
  s: ShardWaits<W>,
  event: WaitEvent<W>,
  now: number,
  unitsPerMs = 1,
): { state: ShardWaits<W>; actions: WaitAction<W>[] } {
  const actions: WaitAction<W>[] = [];
  const retryAt = now + RETRY_AFTER_FAILURE_MS * unitsPerMs;
  const timer = (at: number | null) => {
    if (at !== s.wakeAt) actions.push({ kind: "timer", at });
    return at;
  };
  const tryFirst = (queue: readonly W[], behind: number): ShardWaits<W> => {
    if (queue.length === 0)
      return { queue, behind, wakeAt: timer(null), trying: null, wokenMeanwhile: false };
    actions.push({ kind: "try", waiter: queue[0]! });
    return { queue, behind, wakeAt: timer(null), trying: queue[0]!, wokenMeanwhile: false };
  };
  const answerAll = (queue: readonly W[], outcome: Refusal) => {
    for (const waiter of queue) actions.push({ kind: "answer", waiter, outcome });
  };

  switch (event.kind) {
    case "park": {
      const queue = [...s.queue, event.waiter];
      const behind = event.refusal.current?.token ?? 0;
      // A try in flight will answer for this one too.
      if (s.trying !== null) return { state: { ...s, queue }, actions };
      if (event.refusal.reason !== "held" && event.refusal.reason !== "recovering")
        return { state: tryFirst(queue, behind), actions };
      // The newest refusal knows the lease's end best (a renew moves it on).
      const wakeAt = timer(nextLook(event.refusal, now, unitsPerMs));
      return { state: { queue, behind, wakeAt, trying: null, wokenMeanwhile: false }, actions };
    }

    case "wake":
      if (s.trying !== null) return { state: { ...s, wokenMeanwhile: true }, actions };
      return { state: tryFirst(s.queue, s.behind), actions };

    case "leave": {
      const queue = s.queue.filter((w) => w !== event.waiter);
      if (queue.length === s.queue.length) return { state: s, actions };
      const wakeAt = queue.length === 0 && s.trying === null ? timer(null) : s.wakeAt;
      return { state: { ...s, queue, wakeAt }, actions };
    }

    case "renewed": {
      // The lease they wait behind ends later now: the wake moves with it, no acquire
      // needed to learn that. A try in flight learns it from its own answer.
      if (s.trying !== null || s.queue.length === 0 || event.lease.token !== s.behind)
        return { state: s, actions };
      const wakeAt = timer(now + (event.lease.ttlMs + 1) * unitsPerMs);
      return { state: { ...s, wakeAt }, actions };
    }

    case "failed": {
      const queue = s.queue;
      if (queue.length === 0) return { state: { ...noWaits<W>(), wakeAt: timer(null) }, actions };
      const wakeAt = timer(retryAt);
      return { state: { queue, behind: s.behind, wakeAt, trying: null, wokenMeanwhile: false }, actions };
    }

    case "tried": {
      const tried = s.trying;
      const { outcome } = event;
      const stillThere = tried !== null && s.queue.includes(tried);
      if (outcome.ok) {
        const lease: LeaseView = {
          holder: outcome.holder,
          token: outcome.token,
          ttlMs: outcome.ttlMs,
          sinceUs: outcome.sinceUs,
        };
        if (!stillThere) {
          // Nobody to hand it to: give it back, and the release wakes the rest.
          // Should the release get lost, the timer tries again.
          actions.push({ kind: "give-back", waiter: tried!, token: outcome.token });
          const wakeAt = timer(s.queue.length === 0 ? null : retryAt);
          return {
            state: { queue: s.queue, behind: outcome.token, wakeAt, trying: null, wokenMeanwhile: false },
            actions,
          };
        }
        actions.push({ kind: "answer", waiter: tried, outcome });
        answerAll(
          s.queue.filter((w) => w !== tried),
          heldBy(lease),
        );
        return { state: { ...noWaits<W>(), wakeAt: timer(null) }, actions };
      }
      if (outcome.current !== null && outcome.current.token !== s.behind) {
        // Another lease than the one they waited behind: someone else was granted it.
        answerAll(s.queue, outcome);
        return { state: { ...noWaits<W>(), wakeAt: timer(null) }, actions };
      }
      // The same lease still (or the store still recovering): wait on, unless a wake came meanwhile.
      if (s.wokenMeanwhile) return { state: tryFirst(s.queue, s.behind), actions };
      if (s.queue.length === 0) return { state: { ...noWaits<W>(), wakeAt: timer(null) }, actions };
      const wakeAt = timer(nextLook(outcome, now, unitsPerMs));
      return {
        state: { queue: s.queue, behind: s.behind, wakeAt, trying: null, wokenMeanwhile: false },
        actions,
      };
    }
  }
}
