/**
 * The lease state machine: the single definition of lease semantics.
 *
 * Pure: (state, operation, now) -> (outcome, next state). No I/O, no clock reads.
 * The memory store and the failover simulator run it directly; the Redis scripts in
 * src/store/redis/lua/*.lua implement the same rules and a differential test holds the two
 * to identical outcomes.
 *
 * Time is in integer microseconds of the store's clock (Redis `TIME` on Redis), so expiry
 * is judged by one clock only: the store's, never the caller's.
 */

/** The live or last lease of one shard. */
export interface LeaseRecord {
  holder: string;
  token: number;
  expiresAtUs: number;
  /** when this lease (this token) began; renewals keep it */
  sinceUs: number;
  /** whether its holder has renewed it: proof that the holder heard it was granted */
  renewed: boolean;
  /** the digest of the fence key minted with this lease (see lease/fence-key.ts); "": none */
  keyDigest: string;
}

/** Everything the store keeps per shard. `lastToken` never decreases. */
export interface ShardLeaseState {
  lease: LeaseRecord | null;
  lastToken: number;
  /** the store lineage (see StoreLineage) that last granted or renewed here; null: none recorded */
  lineage: string | null;
  /** nothing is granted, renewed or fenced through before this store time (µs): a lineage hold */
  holdUntilUs: number;
}

export const EMPTY_SHARD_STATE: ShardLeaseState = Object.freeze({
  lease: null,
  lastToken: 0,
  lineage: null,
  holdUntilUs: 0,
});

export type LeaseOperation =
  /** `keyDigest`: what a grant keeps of the fence key the caller minted for it (none: "") */
  | { kind: "acquire"; agent: string; ttlMs: number; keyDigest?: string }
  | { kind: "renew"; agent: string; token: number; ttlMs: number }
  | { kind: "release"; agent: string; token: number }
  /** `keyDigest`: when given (not ""), only the lease minted with that key passes */
  | { kind: "fence"; token: number; keyDigest?: string }
  | { kind: "read" };

/**
 * The store's clock as an operation sees it: now, and when the store last started with
 * no state (Redis process start, or the embedded store's creation), both in integer µs.
 */
export interface StoreClockReading {
  nowUs: number;
  bootUs: number;
  /** the store's lineage; absent for a store that is one process its whole life (memory) */
  lineage?: StoreLineage;
}

/**
 * Which history of writes the store serving now continues. A replica promoted after its
 * master failed may lack the master's last writes (replication is asynchronous), and a
 * server restarted from its persistence files may lack the last second: either may have
 * forgotten a lease whose holder is still acting. Redis names the history: `master_replid`
 * changes on a promotion and on every restart, and `second_repl_offset` is set on a
 * server whose data continues another's (promoted).
 */
export interface StoreLineage {
  id: string;
  promoted: boolean;
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
  /** `fenceKey`: an acquire's grant, from a store that mints keys (never set by this machine) */
  | ({ ok: true; fenceKey?: string } & LeaseView)
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
export function liveLease(state: ShardLeaseState, nowUs: number): LeaseRecord | null {
  const lease = state.lease;
  return lease !== null && nowUs < lease.expiresAtUs ? lease : null;
}

function view(lease: LeaseRecord | null, nowUs: number): LeaseView | null {
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

/**
 * The wait a lineage change imposes on this shard (ms, 0: none), and the state that
 * records it. A shard last written under another lineage — or with no record of one, on
 * a store whose data continues another's — may have lost its last grant or renew: for
 * one TTL from the first operation that notices, nothing is granted, renewed or fenced
 * through, which outlasts any holder that acted on the lost write (it stops on its own
 * within 2/3 TTL of its last renew). Tokens keep climbing across it as long as the new
 * server's clock is not behind the old one's by more than that TTL (clocks kept by NTP).
 * A shard this lineage never saw, on a store that continues no other, has nothing to
 * lose: its first write records the lineage (the boot rule, recoveryWaitMs, covers a
 * restart that lost every key).
 */
export function lineageHold(
  state: ShardLeaseState,
  ttlMs: number,
  clock: StoreClockReading,
): { state: ShardLeaseState; waitMs: number } {
  const lineage = clock.lineage;
  if (lineage === undefined) return { state, waitMs: 0 };
  if (state.lineage === lineage.id || (state.lineage === null && !lineage.promoted)) {
    const waitMs = Math.max(0, Math.ceil((state.holdUntilUs - clock.nowUs) / US_PER_MS));
    return { state, waitMs };
  }
  const holdUntilUs = clock.nowUs + ttlMs * US_PER_MS;
  return { state: { ...state, lineage: lineage.id, holdUntilUs }, waitMs: ttlMs };
}

/** The lineage a write records: the store's, or what the state had (memory: none). */
const lineageOf = (state: ShardLeaseState, clock: StoreClockReading): string | null =>
  clock.lineage?.id ?? state.lineage;

function held(state: ShardLeaseState, waitMs: number): Transition<LeaseOutcome> {
  return { outcome: { ok: false, reason: "recovering", current: null, retryAfterMs: waitMs }, state };
}

function grant(
  state: ShardLeaseState,
  lease: LeaseRecord,
  nowUs: number,
  lineage: string | null,
  reuse: boolean,
): Transition<LeaseOutcome> {
  const lastToken = Math.max(state.lastToken, lease.token);
  let next: ShardLeaseState;
  if (reuse) {
    next = state;
    next.lease = lease;
    next.lastToken = lastToken;
    next.lineage = lineage;
  } else next = { lease, lastToken, lineage, holdUntilUs: state.holdUntilUs };
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
  given: ShardLeaseState,
  agent: string,
  ttlMs: number,
  keyDigest: string,
  clock: StoreClockReading,
): Transition<LeaseOutcome> {
  const nowUs = clock.nowUs;
  const hold = lineageHold(given, ttlMs, clock);
  if (hold.waitMs > 0) return held(hold.state, hold.waitMs);
  const state = hold.state;
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
    {
      holder: agent,
      token,
      expiresAtUs: nowUs + ttlMs * US_PER_MS,
      sinceUs: nowUs,
      renewed: false,
      keyDigest,
    },
    nowUs,
    lineageOf(state, clock),
    false,
  );
}

/** `lease` extended to `expiresAtUs` and marked renewed: a new lease, or with `reuse` the same one, written. */
function extended(lease: LeaseRecord, expiresAtUs: number, reuse: boolean): LeaseRecord {
  if (!reuse)
    return {
      holder: lease.holder,
      token: lease.token,
      expiresAtUs,
      sinceUs: lease.sinceUs,
      renewed: true,
      keyDigest: lease.keyDigest,
    };
  lease.expiresAtUs = expiresAtUs;
  lease.renewed = true;
  return lease;
}

/** Why `agent` presenting `token` is not the live holder, or null when it is. */
function holderMismatch(live: LeaseRecord | null, agent: string, token: number): RefusalReason | null {
  if (live === null) return "expired";
  if (live.holder !== agent) return "held";
  if (live.token !== token) return "stale_token";
  return null;
}

function renew(
  given: ShardLeaseState,
  agent: string,
  token: number,
  ttlMs: number,
  clock: StoreClockReading,
  reuse: boolean,
): Transition<LeaseOutcome> {
  const nowUs = clock.nowUs;
  // Under a lineage hold the holder is told no: whatever it holds, the store may have
  // forgotten a newer grant to another (see lineageHold). It stops; the shard is granted
  // again when the hold ends.
  const hold = lineageHold(given, ttlMs, clock);
  if (hold.waitMs > 0) return held(hold.state, hold.waitMs);
  const state = hold.state;
  const live = liveLease(state, nowUs);
  const mismatch = holderMismatch(live, agent, token);
  if (mismatch !== null) {
    // An expired lease is never revived by a renew, even when nobody else took it: the
    // holder has stopped acting by now, and a new lease must carry a new token.
    return { outcome: { ok: false, reason: mismatch, current: view(live, nowUs) }, state };
  }
  const lineage = lineageOf(state, clock);
  return grant(state, extended(live!, nowUs + ttlMs * US_PER_MS, reuse), nowUs, lineage, reuse);
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
  return { outcome: { ok: true, current: null }, state: { ...state, lease: null } };
}

function fence(
  state: ShardLeaseState,
  token: number,
  keyDigest: string | undefined,
  clock: StoreClockReading,
): Transition<FenceOutcome> {
  const nowUs = clock.nowUs;
  const live = liveLease(state, nowUs);
  const current = view(live, nowUs);
  // A fence starts no hold (it is a read, and names no TTL), but passes nothing under one,
  // nor under a lineage the shard was not written in.
  const lineage = clock.lineage;
  const foreign =
    lineage !== undefined && state.lineage !== lineage.id && (state.lineage !== null || lineage.promoted);
  if (foreign || nowUs < state.holdUntilUs)
    return { outcome: { allowed: false, reason: "recovering", current }, state };
  if (live === null) return { outcome: { allowed: false, reason: "expired", current }, state };
  // A wrong key is told as a wrong token: either way the caller is not the live lease.
  if (live.token !== token || (keyDigest !== undefined && keyDigest !== "" && live.keyDigest !== keyDigest))
    return { outcome: { allowed: false, reason: "stale_token", current }, state };
  return { outcome: { allowed: true, current }, state };
}

/**
 * Apply one operation to one shard's state at the store's clock reading. `reuse`: the
 * caller gives `state` up, and a renew may write the renewed lease into it (and return
 * it) instead of making a new state — for a caller that keeps one state per shard and
 * renews it millions of times (the simulator). The same rules either way.
 */
export function transition<Op extends LeaseOperation>(
  state: ShardLeaseState,
  op: Op,
  clock: StoreClockReading,
  reuse?: boolean,
): Transition<OutcomeOf<Op>>;
export function transition(
  state: ShardLeaseState,
  op: LeaseOperation,
  clock: StoreClockReading,
  reuse = false,
): Transition<LeaseOutcome | ReleaseOutcome | FenceOutcome | ReadOutcome> {
  const nowUs = clock.nowUs;
  switch (op.kind) {
    case "acquire":
      return acquire(state, op.agent, op.ttlMs, op.keyDigest ?? "", clock);
    case "renew":
      return renew(state, op.agent, op.token, op.ttlMs, clock, reuse && state !== EMPTY_SHARD_STATE);
    case "release":
      return release(state, op.agent, op.token, nowUs);
    case "fence":
      return fence(state, op.token, op.keyDigest, clock);
    case "read":
      return {
        outcome: { current: view(liveLease(state, nowUs), nowUs), lastToken: state.lastToken },
        state,
      };
  }
}
