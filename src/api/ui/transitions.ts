import type { ShardSummary } from "../../contracts/shards.js";

/*
 * Lease transitions told apart by comparing two looks at the store's leases. Pure: the
 * looks carry their times. A look sees every lease whoever wrote it (this bridge, another
 * one on the same Redis, or nobody: an expiry is no write at all), which is why the page
 * compares looks instead of listening to this bridge's own writes.
 */

/** A live lease as one look saw it; times in ms since the epoch. */
export interface SeenLease {
  holder: string;
  token: number;
  /** when this lease began, by the store's clock */
  sinceMs: number;
  /** when it ends unless renewed: the look's time plus the time it had left */
  deadlineMs: number;
}

/** The live leases of one look, by shard. */
export type LeaseLook = Map<string, SeenLease>;

export type TransitionKind =
  /** nobody held the shard; now someone does */
  | "granted"
  /** another agent holds it now, under a new lease */
  | "handed over"
  /** the same agent holds it under a new lease: it restarted, or acquired again */
  | "granted again"
  /** the lease ran out and nobody took the shard */
  | "expired"
  /** the lease ended before its deadline (a release) and nobody took the shard */
  | "released"
  /** the first look at a held shard: who holds it and since when (how it came to them was not seen) */
  | "holding";

export interface LeaseTransition {
  /** 1, 2, 3, … in the order this bridge saw them */
  seq: number;
  /** when it happened: a new lease's start by the store's clock, an expiry's deadline, or the look that saw a release */
  at: string;
  shard: string;
  kind: TransitionKind;
  from: string | null;
  to: string | null;
  /** the sentence the page shows */
  text: string;
}

/**
 * How far a new lease may begin before the old one's deadline and still count as taken
 * after expiry: the deadline is judged by this bridge's clock from one look, the start by
 * the store's, and the two agree to well within this on one NTP-synced network.
 */
const DEADLINE_SLACK_MS = 250;

/** The live leases of GET /v1/shards's rows (read with tokens), seen at `atMs`. */
export function leaseLook(shards: readonly ShardSummary[], atMs: number): LeaseLook {
  const look: LeaseLook = new Map();
  for (const { name, lease } of shards) {
    if (lease === null || lease.token === null) continue;
    look.set(name, {
      holder: lease.holder,
      token: lease.token,
      sinceMs: Date.parse(lease.since),
      deadlineMs: atMs + lease.ttl_ms,
    });
  }
  return look;
}

function sentence(
  kind: TransitionKind,
  shard: string,
  from: string | null,
  to: string | null,
  why = "",
): string {
  switch (kind) {
    case "granted":
      return `${shard}: granted to ${to}`;
    case "handed over":
      return `${shard}: handed over from ${from} to ${to}${why}`;
    case "granted again":
      return `${shard}: granted to ${to} again, under a new lease (restarted, or acquired anew)`;
    case "expired":
      return `${shard}: ${from}'s lease expired; nobody holds it`;
    case "released":
      return `${shard}: released by ${from}; nobody holds it`;
    case "holding":
      return `${shard}: held by ${to}, under a lease that began then`;
  }
}

/**
 * What changed from `before` (null: there was no earlier look) to `after`, seen at
 * `nowMs`, oldest first, without sequence numbers. Renewals are no transition (same
 * token). Between two looks only the last state is seen: a shard granted and released
 * in between shows nothing, A → B → C shows as A → C.
 */
export function leaseTransitions(
  before: LeaseLook | null,
  after: LeaseLook,
  nowMs: number,
): Array<Omit<LeaseTransition, "seq">> {
  const found: Array<Omit<LeaseTransition, "seq"> & { atMs: number }> = [];
  const add = (
    atMs: number,
    shard: string,
    kind: TransitionKind,
    from: string | null,
    to: string | null,
    why?: string,
  ) =>
    found.push({
      atMs,
      at: new Date(atMs).toISOString(),
      shard,
      kind,
      from,
      to,
      text: sentence(kind, shard, from, to, why),
    });
  for (const [shard, now] of after) {
    const was = before?.get(shard);
    if (before === null) add(now.sinceMs, shard, "holding", null, now.holder);
    else if (was === undefined) add(now.sinceMs, shard, "granted", null, now.holder);
    else if (was.token === now.token) continue;
    else if (was.holder === now.holder) add(now.sinceMs, shard, "granted again", was.holder, now.holder);
    else {
      const expired = now.sinceMs >= was.deadlineMs - DEADLINE_SLACK_MS;
      const why = expired ? ` (${was.holder}'s lease had expired)` : ` (${was.holder} released it)`;
      add(now.sinceMs, shard, "handed over", was.holder, now.holder, why);
    }
  }
  for (const [shard, was] of before ?? []) {
    if (after.has(shard)) continue;
    if (nowMs >= was.deadlineMs) add(was.deadlineMs, shard, "expired", was.holder, null);
    else add(nowMs, shard, "released", was.holder, null);
  }
  found.sort((a, b) => a.atMs - b.atMs || a.shard.localeCompare(b.shard));
  return found.map(({ atMs: _atMs, ...transition }) => transition);
}
