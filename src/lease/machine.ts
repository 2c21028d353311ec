/**
 * The lease state machine: the single definition of lease semantics.
 *
 * Pure: (state, operation, now) -> (outcome, next state). No I/O, no clock reads.
 * The memory store and the failover simulator run it directly; the Redis scripts in
 * src/redis/*.lua implement the same rules and a differential test holds the two
 * to identical outcomes.
 *
 * Time is in integer microseconds of the store's clock (Redis `TIME` on Redis), so expiry
 * is judged by one clock only: the store's, never the caller's.
 */

/** The live or last lease of one shard. */
export interface Lease {
  holder: string;
  token: number;
  expiresAtUs: number;
  /** when this lease (this token) began; renewals keep it */
  sinceUs: number;
  /** whether its holder has renewed it: proof that the holder heard it was granted */
  renewed: boolean;
}

/** Everything the store keeps per shard. `lastToken` never decreases. */
export interface ShardLeaseState {
  lease: Lease | null;
  lastToken: number;
}

export const EMPTY_SHARD_STATE: ShardLeaseState = Object.freeze({ lease: null, lastToken: 0 });

export type LeaseOperation =
  | { kind: "acquire"; agent: string; ttlMs: number }
  | { kind: "renew"; agent: string; token: number; ttlMs: number }
  | { kind: "release"; agent: string; token: number }
  | { kind: "fence"; token: number }
  | { kind: "read" };

/**
 * The store's clock as an operation sees it: now, and when the store last started with
 * no state (Redis process start, or the embedded store's creation), both in integer µs.
 */
export interface StoreClockReading {
  nowUs: number;
  bootUs: number;
}

/** Why an operation was refused. */
export type RefusalReason =
  /** another agent holds a live lease */
  | "held"
  /** there is no live lease (never taken, released, or expired) */
  | "expired"
  /** the caller holds the live lease but under another token (an older incarnation) */
  | "stale_token"
  /** the store started empty less than one TTL ago and knows nothing of this shard */
  | "recovering";

/** A live lease as seen at `now`: who, which token, and how long it has left. */
export interface LeaseView {
  holder: string;
  token: number;
  ttlMs: number;
  /** store time when this holder's lease began, µs */
  sinceUs: number;
}

export type LeaseOutcome =
  | ({ ok: true } & LeaseView)
  | { ok: false; reason: RefusalReason; current: LeaseView | null; retryAfterMs?: number };

export interface ReleaseOutcome {
  ok: boolean;
  /** set when refused: the live lease that someone else holds */
  reason?: RefusalReason;
  current: LeaseView | null;
}

export interface FenceOutcome {
  allowed: boolean;
  reason?: RefusalReason;
  current: LeaseView | null;
}

export interface ReadOutcome {
  current: LeaseView | null;
  lastToken: number;
}

export type OutcomeOf<Op extends LeaseOperation> = Op["kind"] extends "acquire" | "renew"
  ? LeaseOutcome
  : Op["kind"] extends "release"
    ? ReleaseOutcome
    : Op["kind"] extends "fence"
      ? FenceOutcome
      : ReadOutcome;

export interface Transition<O> {
  outcome: O;
  state: ShardLeaseState;
}

const US_PER_MS = 1000;

/** The lease if it is live at `nowUs`; a lease is dead from its expiry instant on. */
export function liveLease(state: ShardLeaseState, nowUs: number): Lease | null {
  const lease = state.lease;
  return lease !== null && nowUs < lease.expiresAtUs ? lease : null;
}

function view(lease: Lease | null, nowUs: number): LeaseView | null {
  if (lease === null) return null;
  return {
    holder: lease.holder,
    token: lease.token,
    ttlMs: Math.floor((lease.expiresAtUs - nowUs) / US_PER_MS),
    sinceUs: lease.sinceUs,
  };
}

/**
 * A new token is above every token minted before on this shard, and at least the store's
 * clock in microseconds. The clock term is what keeps tokens increasing when the store
 * loses every key (a Redis restart without persistence): a new token then starts from the
 * current time, which is past every earlier token as long as tokens were not minted faster
 * than one per microsecond per shard and the store's clock did not step backwards.
 */
export function mintToken(lastToken: number, nowUs: number): number {
  return Math.max(lastToken + 1, nowUs);
}

function grant(state: ShardLeaseState, lease: Lease, nowUs: number): Transition<LeaseOutcome> {
  const next: ShardLeaseState = { lease, lastToken: Math.max(state.lastToken, lease.token) };
  // Spelled out, not spread: one object shape on the path the simulator runs millions of times.
  const outcome: LeaseOutcome = {
    ok: true,
    holder: lease.holder,
    token: lease.token,
    ttlMs: Math.floor((lease.expiresAtUs - nowUs) / US_PER_MS),
    sinceUs: lease.sinceUs,
  };
  return { outcome, state: next };
}

/**
 * How long, after a store started empty, a shard it knows nothing of stays closed. A store
 * that lost every key (Redis restarted without persistence, the embedded store's process
 * restarted) cannot tell a new shard from one whose holder is still acting until its
 * renew deadline; waiting one TTL from the store's start outlasts any such holder.
 */
export function recoveryWaitMs(state: ShardLeaseState, ttlMs: number, clock: StoreClockReading): number {
  if (state.lastToken !== 0) return 0;
  return Math.max(0, Math.ceil((clock.bootUs + ttlMs * US_PER_MS - clock.nowUs) / US_PER_MS));
}

function acquire(
  state: ShardLeaseState,
  agent: string,
  ttlMs: number,
  clock: StoreClockReading,
): Transition<LeaseOutcome> {
  const nowUs = clock.nowUs;
  const wait = recoveryWaitMs(state, ttlMs, clock);
  if (wait > 0) {
    return { outcome: { ok: false, reason: "recovering", current: null, retryAfterMs: wait }, state };
  }
  const live = liveLease(state, nowUs);
  // The holder's own id may take a new lease only over one it has renewed: an agent that
  // can send but not hear (a one-way partition) would otherwise be granted lease after
  // lease without ever learning it, and no standby would get the shard until the link
  // healed. Over a lease it never renewed it waits, like anyone, for the lease to end.
  if (live !== null && (live.holder !== agent || !live.renewed)) {
    return { outcome: { ok: false, reason: "held", current: view(live, nowUs) }, state };
  }
  // Every other acquire starts a new lease with a new token, also when this agent id holds
  // the live lease already: the caller may be a restarted process, or a keeper that gave
  // the lease up at its deadline, and whatever an older incarnation still has in flight
  // must be fenced out. Extending a lease under the same token is what renew is for.
  const token = mintToken(state.lastToken, nowUs);
  return grant(
    state,
    { holder: agent, token, expiresAtUs: nowUs + ttlMs * US_PER_MS, sinceUs: nowUs, renewed: false },
    nowUs,
  );
}

/** Why `agent` presenting `token` is not the live holder, or null when it is. */
function holderMismatch(live: Lease | null, agent: string, token: number): RefusalReason | null {
  if (live === null) return "expired";
  if (live.holder !== agent) return "held";
  if (live.token !== token) return "stale_token";
  return null;
}

function renew(
  state: ShardLeaseState,
  agent: string,
  token: number,
  ttlMs: number,
  nowUs: number,
): Transition<LeaseOutcome> {
  const live = liveLease(state, nowUs);
  const mismatch = holderMismatch(live, agent, token);
  if (mismatch !== null) {
    // An expired lease is never revived by a renew, even when nobody else took it: the
    // holder has stopped acting by now, and a new lease must carry a new token.
    return { outcome: { ok: false, reason: mismatch, current: view(live, nowUs) }, state };
  }
  const lease = live!;
  return grant(
    state,
    {
      holder: lease.holder,
      token: lease.token,
      expiresAtUs: nowUs + ttlMs * US_PER_MS,
      sinceUs: lease.sinceUs,
      renewed: true,
    },
    nowUs,
  );
}

function release(
  state: ShardLeaseState,
  agent: string,
  token: number,
  nowUs: number,
): Transition<ReleaseOutcome> {
  const live = liveLease(state, nowUs);
  const mismatch = holderMismatch(live, agent, token);
  if (mismatch === "expired") {
    // Nothing live to give up: releasing is idempotent, so a retried release succeeds.
    return { outcome: { ok: true, current: null }, state };
  }
  if (mismatch !== null) {
    return { outcome: { ok: false, reason: mismatch, current: view(live, nowUs) }, state };
  }
  return { outcome: { ok: true, current: null }, state: { lease: null, lastToken: state.lastToken } };
}

function fence(state: ShardLeaseState, token: number, nowUs: number): Transition<FenceOutcome> {
  const live = liveLease(state, nowUs);
  const current = view(live, nowUs);
  if (live === null) return { outcome: { allowed: false, reason: "expired", current }, state };
  if (live.token !== token) return { outcome: { allowed: false, reason: "stale_token", current }, state };
  return { outcome: { allowed: true, current }, state };
}

/** Apply one operation to one shard's state at the store's clock reading. */
export function transition<Op extends LeaseOperation>(
  state: ShardLeaseState,
  op: Op,
  clock: StoreClockReading,
): Transition<OutcomeOf<Op>>;
export function transition(
  state: ShardLeaseState,
  op: LeaseOperation,
  clock: StoreClockReading,
): Transition<LeaseOutcome | ReleaseOutcome | FenceOutcome | ReadOutcome> {
  const nowUs = clock.nowUs;
  switch (op.kind) {
    case "acquire":
      return acquire(state, op.agent, op.ttlMs, clock);
    case "renew":
      return renew(state, op.agent, op.token, op.ttlMs, nowUs);
    case "release":
      return release(state, op.agent, op.token, nowUs);
    case "fence":
      return fence(state, op.token, nowUs);
    case "read":
      return {
        outcome: { current: view(liveLease(state, nowUs), nowUs), lastToken: state.lastToken },
        state,
      };
  }
}
