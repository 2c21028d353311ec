import { IronicError } from "../../upstream/ironic-client.js";

/** How failed Ironic calls are retried. */
export interface RetryPolicy {
  /** the wait after a first failed attempt, doubled after each further one */
  backoffMs: number;
  /** the longest wait between attempts */
  maxBackoffMs: number;
  /** attempts at a node Ironic does not know (404) before its change is given up */
  goneAttempts: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { backoffMs: 500, maxBackoffMs: 30_000, goneAttempts: 3 };

/** What to do after attempt number `attempt` (1-based) at a change failed. */
export type FailureVerdict =
  { kind: "retry"; afterMs: number; why: string } | { kind: "give_up"; reason: string };

/**
 * A failed Ironic call, judged. Only what can never succeed is given up: a node Ironic
 * does not know (404, after a few attempts: an enrolment may be on its way) and a change
 * Ironic refuses (400: a trait name it does not take, or past its 50 traits a node).
 * Everything else is a delay, never a loss: a locked node (409) frees itself, and an
 * Ironic that is down, slow, or refuses our credentials (401/403: an operator fixes them)
 * is tried again, the wait doubling up to `maxBackoffMs`.
 */
export function judgeFailure(error: unknown, attempt: number, policy: RetryPolicy): FailureVerdict {
  const afterMs = Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** Math.min(attempt - 1, 30));
  if (!(error instanceof IronicError)) return { kind: "retry", afterMs, why: String(error) };
  if (error.status === 404 && attempt >= policy.goneAttempts)
    return { kind: "give_up", reason: `node not found in Ironic (404): ${error.detail}` };
  if (error.status === 400)
    return { kind: "give_up", reason: `Ironic refused the change (400): ${error.detail}` };
  return { kind: "retry", afterMs, why: error.message };
}

/** The partitions one of `live` delivery workers should own: an even share, rounded up. */
export const fairShare = (partitions: number, live: number): number =>
  Math.ceil(partitions / Math.max(1, live));

/**
 * How many Ironic calls a bridge lets be in flight at once after one more call ended, TCP's
 * way: `max` (--ironic-concurrency) while Ironic answers; each call left without an answer
 * (its timeout, a lost connection) halves it, down to one; each answer adds 1/window (about
 * one call more per window's worth of answers), back up to `max`. Calls start while fewer
 * than `callsAllowed(window)` are in flight.
 *
 * A call is abandoned at its timeout, a quarter of the owner TTL (the order rule, see
 * IronicQueueDelivery.mayCall), but Ironic still runs what it received, ahead of the retry:
 * at a fixed count, an Ironic that takes longer than the timeout to answer that many calls
 * has every call abandoned and sent again, and nothing lands.
 */
export function nextWindow(window: number, max: number, answered: boolean): number {
  return answered ? Math.min(max, window + 1 / window) : Math.max(1, window / 2);
}

/** The calls a window lets be in flight. */
export const callsAllowed = (window: number): number => Math.floor(window);
