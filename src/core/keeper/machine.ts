import { renewDeadlineMs, renewIntervalMs } from "../lease/bounds.js";
import type { LeaseOutcome, LeaseView, RefusalReason } from "../lease/machine.js";

/**
 * The lease keeper's rules, pure: one agent's lease on one shard, as the agent side of
 * `lease/machine.ts`. (state, event, clocks) -> (state, actions). No timers, no I/O, no
 * clock of its own: the driver (`LeaseKeeper`) turns actions into requests and timers and
 * feeds their results back as events, and the simulator can drive the same rules on its
 * virtual clock.
 *
 * The rules: a standby asks for the lease, polling with jitter, and comes back when the
 * lease it was shown runs out, or sooner. The holder renews every TTL/3 after the last
 * renew it sent, and stops acting on its own when either of its clocks passes the renew
 * deadline — 2/3 TTL after the last renew it sent that succeeded — without having to
 * reach anyone. The store starts a TTL no earlier than the request was sent, so the agent
 * stops at least TTL/3 before any other agent can be granted the lease, whatever the
 * network did. The monotonic clock does not advance while a host is suspended or a VM is
 * paused; the wall clock does: whichever says the deadline passed first wins.
 */

export interface KeeperConfig {
  /** the TTL to ask for; a shorter one the store grants (a shard's definition) rules */
  ttlMs: number;
  /** longest a standby waits between attempts, before jitter */
  standbyPollMs: number;
  /**
   * A standby's acquire waits at the bridge this long for the lease (`wait_ms`), and asks
   * again as soon as it is answered after a wait; 0 or none: it polls. A bridge that does
   * not wait answers at once, without `waitedMs`, and is polled.
   */
  waitMs?: number;
  /**
   * The driver's clock units per millisecond (default 1). Every clock reading, timer and
   * timeout the machine takes or gives is in these units: milliseconds for the agent's
   * `performance.now()`, microseconds for the simulator, whose arithmetic then stays in
   * whole units where it was before.
   */
  unitsPerMs?: number;
}

export type KeeperPhase = "standby" | "active" | "stopped";

export interface KeeperState {
  readonly phase: KeeperPhase;
  /** the token to act under while active */
  readonly token: number | null;
  /** the TTL timing is derived from: the shorter of the asked and the granted one */
  readonly ttlMs: number;
  /** by the monotonic clock, and by the wall clock: act only before both */
  readonly deadlineMono: number;
  readonly deadlineWall: number;
  /** the request whose answer counts; answers to any other are stale and dropped */
  readonly attempt: number;
  /** why and behind whom the agent last stood by, to report only changes */
  readonly standbyKey: string | null;
}

/**
 * When an event happens, by the agent's two clocks, and a uniform [0,1) draw for jitter.
 * The rules read `random` only when they need a draw, at most once per event, so a driver
 * may hand a getter that draws on reading (the simulator does: its random sequence then
 * holds only the draws that were used).
 */
export interface KeeperClocks {
  readonly mono: number;
  readonly wall: number;
  readonly random: number;
}

/** When a request left, by both clocks: the store counts the TTL from no earlier. */
export interface SentAt {
  mono: number;
  wall: number;
}

export type KeeperEvent =
  | { kind: "start" }
  /** the step timer fired: time to ask for the lease (standby) or renew it (active) */
  | { kind: "step" }
  /** the deadline timer fired */
  | { kind: "deadline" }
  /** the agent is about to act: may it? (the deadline may have passed with no timer run) */
  | { kind: "check" }
  /**
   * `waitedMs`: the bridge waited before the acquire that answers was tried (a waiting
   * acquire's answer): the store began a granted lease no earlier than that after `sent`.
   */
  | { kind: "acquired"; attempt: number; sent: SentAt; outcome: LeaseOutcome; waitedMs?: number }
  | { kind: "renewed"; attempt: number; sent: SentAt; outcome: LeaseOutcome }
  /**
   * No answer in time, or the request failed. `retryAfterMs`: a failed acquire the driver
   * was told to wait this long after (its own back-off: a shard the bridge no longer
   * knows), instead of a standby's poll; the standby then reports whom it stands behind
   * again once answered.
   */
  | {
      kind: "failed";
      attempt: number;
      op: "acquire" | "renew";
      error: string;
      cause?: unknown;
      retryAfterMs?: number;
    }
  | { kind: "stop" };

/** What an agent reports; `LeaseKeeper` emits these as they are. */
export type KeeperReport =
  /** `fenceKey`: the grant's key for the fenced Ironic endpoint, where the store minted one */
  | { kind: "active"; token: number; ttlMs: number; fenceKey: string | null }
  | { kind: "standby"; current: LeaseView | null; reason: RefusalReason; retryAfterMs?: number }
  | { kind: "lost"; token: number; reason: "refused" | "deadline"; detail: string }
  | { kind: "renewed"; token: number; latencyMs: number }
  | { kind: "store-error"; op: "acquire" | "renew"; error: string; cause?: unknown };

/** Actions carry times in the driver's clock units (`unitsPerMs`). */
export type KeeperAction =
  /** send this request, give up on it after `timeout`, and answer with `attempt` */
  | { kind: "send"; op: "acquire"; attempt: number; sent: SentAt; timeout: number; waitMs: number }
  | { kind: "send"; op: "renew"; attempt: number; token: number; sent: SentAt; timeout: number }
  /** hand back a lease: on stop, or one granted after stop. Nothing answers to the machine. */
  | { kind: "send"; op: "release"; token: number; timeout: number }
  /** (re)arm a timer at a monotonic time; null cancels it */
  | { kind: "timer"; timer: "step" | "deadline"; atMono: number | null }
  | { kind: "report"; report: KeeperReport };

export interface KeeperStep {
  state: KeeperState;
  actions: KeeperAction[];
}

/**
 * Where a step's actions go, in order. `keeperStep` collects them in an array; a driver on
 * a hot path (the simulator renews millions of times) takes them one by one instead.
 */
export interface KeeperActionSink {
  act(action: KeeperAction): void;
}

/** A renew that failed is tried again this soon (or a quarter interval, if longer). */
const RENEW_RETRY_MIN_MS = 50;

export function initialKeeperState(config: KeeperConfig): KeeperState {
  return keeperState("standby", null, config.ttlMs, 0, 0, 0, null);
}

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * The state the event being stepped may be written into instead of a new one (see
 * `advanceKeeper`'s `reuse`), or null. Every event makes at most one new state, and the
 * rules read what they need of the old state before they make it.
 */
let reusable: Writable<KeeperState> | null = null;

/**
 * Every state is built here, field by field in one order (not spread from the last one),
 * so all states share one object shape: the simulator steps millions of them.
 */
function keeperState(
  phase: KeeperPhase,
  token: number | null,
  ttlMs: number,
  deadlineMono: number,
  deadlineWall: number,
  attempt: number,
  standbyKey: string | null,
): KeeperState {
  const into = reusable;
  if (into === null) return { phase, token, ttlMs, deadlineMono, deadlineWall, attempt, standbyKey };
  reusable = null;
  into.phase = phase;
  into.token = token;
  into.ttlMs = ttlMs;
  into.deadlineMono = deadlineMono;
  into.deadlineWall = deadlineWall;
  into.attempt = attempt;
  into.standbyKey = standbyKey;
  return into;
}

const withAttempt = (s: KeeperState, attempt: number): KeeperState =>
  keeperState(s.phase, s.token, s.ttlMs, s.deadlineMono, s.deadlineWall, attempt, s.standbyKey);

/** Whether the holder may still act at these clock readings. */
export function mayAct(state: KeeperState, mono: number, wall: number): boolean {
  return (
    state.phase === "active" && state.token !== null && mono < state.deadlineMono && wall < state.deadlineWall
  );
}

/** Standbys spread out so they do not poll in lock step: between half and all of `wait`. */
export const standbyJitter = (wait: number, random: number): number => wait * (0.5 + 0.5 * random);

/** One event through the rules, its actions collected. */
export function keeperStep(
  config: KeeperConfig,
  state: KeeperState,
  event: KeeperEvent,
  now: KeeperClocks,
): KeeperStep {
  const actions: KeeperAction[] = [];
  const next = advanceKeeper(config, state, event, now, { act: (action) => actions.push(action) });
  return { state: next, actions };
}

/*
 * The rules below are plain functions of (config, state, clocks, sink), not closures made
 * per event: the simulator runs them for every renew of a day of a thousand agents.
 */

const unitsOf = (config: KeeperConfig): number => config.unitsPerMs ?? 1;
const graceOf = (config: KeeperConfig, s: KeeperState): number => renewDeadlineMs(s.ttlMs) * unitsOf(config);
const intervalOf = (config: KeeperConfig, s: KeeperState): number =>
  renewIntervalMs(s.ttlMs) * unitsOf(config);

function armStep(out: KeeperActionSink, atMono: number): void {
  out.act({ kind: "timer", timer: "step", atMono });
}

function pollLater(config: KeeperConfig, now: KeeperClocks, out: KeeperActionSink): void {
  armStep(out, now.mono + standbyJitter(config.standbyPollMs * unitsOf(config), now.random));
}

/** Stop acting: back to standby, and ask again after a jittered poll. */
function lose(
  config: KeeperConfig,
  s: KeeperState,
  now: KeeperClocks,
  out: KeeperActionSink,
  reason: "refused" | "deadline",
  detail: string,
): KeeperState {
  out.act({ kind: "report", report: { kind: "lost", token: s.token!, reason, detail } });
  out.act({ kind: "timer", timer: "deadline", atMono: null });
  pollLater(config, now, out);
  return keeperState("standby", null, s.ttlMs, s.deadlineMono, s.deadlineWall, s.attempt, s.standbyKey);
}

/** The deadline passed (by either clock) while active: lose, else unchanged. */
function checked(
  config: KeeperConfig,
  s: KeeperState,
  now: KeeperClocks,
  out: KeeperActionSink,
): KeeperState {
  return s.phase === "active" && !mayAct(s, now.mono, now.wall)
    ? lose(config, s, now, out, "deadline", "renew deadline passed before a renew succeeded")
    : s;
}

/** Held on `ttlMs` from a request sent at `sent`: the deadline and the next renew run from the send. */
function heldFrom(
  config: KeeperConfig,
  s: KeeperState,
  ttlMs: number,
  sent: SentAt,
  out: KeeperActionSink,
  /** the lease just won, or null for a renew of the one held */
  won: { token: number } | null,
): KeeperState {
  const grace = renewDeadlineMs(ttlMs) * unitsOf(config);
  const next = keeperState(
    "active",
    won === null ? s.token : won.token,
    ttlMs,
    sent.mono + grace,
    sent.wall + grace,
    s.attempt,
    won === null ? s.standbyKey : null,
  );
  out.act({ kind: "timer", timer: "deadline", atMono: next.deadlineMono });
  armStep(out, sent.mono + renewIntervalMs(ttlMs) * unitsOf(config));
  return next;
}

/**
 * Whether the next acquire waits at the bridge: where the config says so, once the keeper
 * has been refused since it last held the lease (its `standbyKey`). The first acquire is
 * answered at once, so a standby reports whom it stands behind as it starts.
 */
const waitsNow = (config: KeeperConfig, s: KeeperState): boolean =>
  (config.waitMs ?? 0) > 0 && s.standbyKey !== null;

function sendAcquire(
  config: KeeperConfig,
  s: KeeperState,
  now: KeeperClocks,
  out: KeeperActionSink,
): KeeperState {
  const next = withAttempt(s, s.attempt + 1);
  const sent = { mono: now.mono, wall: now.wall };
  const waitMs = waitsNow(config, s) ? config.waitMs! : 0;
  // A waiting acquire may be answered as late as its wait: its timeout counts from there.
  const timeout = graceOf(config, s) + waitMs * unitsOf(config);
  out.act({ kind: "send", op: "acquire", attempt: next.attempt, sent, timeout, waitMs });
  return next;
}

function sendRenew(s: KeeperState, now: KeeperClocks, out: KeeperActionSink): KeeperState {
  const next = withAttempt(s, s.attempt + 1);
  out.act({
    kind: "send",
    op: "renew",
    attempt: next.attempt,
    token: s.token!,
    sent: { mono: now.mono, wall: now.wall },
    // No answer before the deadline is as good as none: the agent stops then anyway.
    timeout: Math.max(1, s.deadlineMono - now.mono),
  });
  return next;
}

function onAcquired(
  config: KeeperConfig,
  state: KeeperState,
  event: Extract<KeeperEvent, { kind: "acquired" }>,
  now: KeeperClocks,
  out: KeeperActionSink,
): KeeperState {
  const { outcome } = event;
  if (state.phase === "stopped") {
    // Stopped while this acquire was in flight: hand a granted lease straight back, so
    // a standby does not wait a whole TTL for a lease nobody uses.
    if (outcome.ok)
      out.act({ kind: "send", op: "release", token: outcome.token, timeout: graceOf(config, state) });
    return state;
  }
  if (event.attempt !== state.attempt || state.phase !== "standby") return state;
  if (outcome.ok) {
    const ttlMs = Math.min(config.ttlMs, outcome.ttlMs);
    const grace = renewDeadlineMs(ttlMs) * unitsOf(config);
    // After a wait the lease began at least `waitedMs` after the send: count from there.
    const waited = (event.waitedMs ?? 0) * unitsOf(config);
    const from = waited > 0 ? { mono: event.sent.mono + waited, wall: event.sent.wall + waited } : event.sent;
    if (now.mono >= from.mono + grace || now.wall >= from.wall + grace) {
      // Granted, but the answer came too late to act on (the agent was frozen): the
      // lease runs out unrenewed, and the agent asks again.
      pollLater(config, now, out);
      return state;
    }
    out.act({
      kind: "report",
      report: {
        kind: "active",
        token: outcome.token,
        ttlMs: outcome.ttlMs,
        fenceKey: outcome.fenceKey ?? null,
      },
    });
    return heldFrom(config, state, ttlMs, from, out, { token: outcome.token });
  }
  const current = outcome.current;
  const standbyKey = `${outcome.reason}:${current?.holder ?? ""}`;
  if (standbyKey !== state.standbyKey)
    out.act({
      kind: "report",
      report: {
        kind: "standby",
        current,
        reason: outcome.reason,
        ...(outcome.retryAfterMs !== undefined && { retryAfterMs: outcome.retryAfterMs }),
      },
    });
  // Ask again at once, waiting: after the first refusal, and after a wait the bridge ended
  // (the lease changed hands, or the wait ran out). A waiting acquire answered without a
  // wait (a bridge that cannot wait), or at once with nothing new (a bridge closing its
  // waits), is polled as below.
  const units = unitsOf(config);
  const waited = event.waitedMs;
  const askedToWait = waitsNow(config, state);
  const again =
    (config.waitMs ?? 0) > 0 &&
    (askedToWait
      ? waited !== undefined && (waited >= 1 || standbyKey !== state.standbyKey)
      : outcome.reason === "held" || outcome.reason === "recovering");
  if (again) {
    armStep(out, now.mono);
  } else {
    // Come back when the holder's lease would run out (or the store's recovery wait is
    // over), or sooner, to catch a release.
    const untilFreeMs = current !== null ? current.ttlMs + 1 : (outcome.retryAfterMs ?? config.standbyPollMs);
    armStep(
      out,
      now.mono + Math.min(untilFreeMs * units, standbyJitter(config.standbyPollMs * units, now.random)),
    );
  }
  if (standbyKey === state.standbyKey) return state;
  const { phase, token, ttlMs, deadlineMono, deadlineWall, attempt } = state;
  return keeperState(phase, token, ttlMs, deadlineMono, deadlineWall, attempt, standbyKey);
}

function onRenewed(
  config: KeeperConfig,
  state: KeeperState,
  event: Extract<KeeperEvent, { kind: "renewed" }>,
  now: KeeperClocks,
  out: KeeperActionSink,
): KeeperState {
  if (event.attempt !== state.attempt || state.phase !== "active") return state;
  const { outcome } = event;
  if (!outcome.ok) {
    const holder = outcome.current ? ` (holder ${outcome.current.holder})` : "";
    return lose(config, state, now, out, "refused", `renew refused: ${outcome.reason}${holder}`);
  }
  const held = heldFrom(config, state, Math.min(config.ttlMs, outcome.ttlMs), event.sent, out, null);
  out.act({
    kind: "report",
    report: {
      kind: "renewed",
      token: state.token!,
      latencyMs: (now.mono - event.sent.mono) / unitsOf(config),
    },
  });
  return held;
}

/**
 * One event through the rules: the next state, its actions handed to `out` in order.
 * `reuse`: the caller gives `state` up, and the next state may be written into it (and
 * returned) instead of made new — for a driver that keeps one state per keeper and steps
 * it millions of times (the simulator). The same rules either way (a test holds the two
 * to each other).
 */
export function advanceKeeper(
  config: KeeperConfig,
  state: KeeperState,
  event: KeeperEvent,
  now: KeeperClocks,
  out: KeeperActionSink,
  reuse = false,
): KeeperState {
  // A sink may step another keeper from inside this one: its reuse is its own.
  const outer = reusable;
  reusable = reuse ? state : null;
  try {
    return step(config, state, event, now, out);
  } finally {
    reusable = outer;
  }
}

function step(
  config: KeeperConfig,
  state: KeeperState,
  event: KeeperEvent,
  now: KeeperClocks,
  out: KeeperActionSink,
): KeeperState {
  switch (event.kind) {
    case "start":
      if (state.phase === "standby") armStep(out, now.mono);
      return state;

    case "check":
      return checked(config, state, now, out);

    case "deadline": {
      const next = checked(config, state, now, out);
      // A timer may fire a little early by the monotonic clock: arm it again.
      if (next.phase === "active") out.act({ kind: "timer", timer: "deadline", atMono: next.deadlineMono });
      return next;
    }

    case "step": {
      if (state.phase === "standby") return sendAcquire(config, state, now, out);
      if (state.phase !== "active") return state;
      const held = checked(config, state, now, out);
      return held.phase === "active" ? sendRenew(held, now, out) : held;
    }

    case "acquired":
      return onAcquired(config, state, event, now, out);

    case "renewed":
      return onRenewed(config, state, event, now, out);

    case "failed": {
      if (event.attempt !== state.attempt) return state;
      out.act({
        kind: "report",
        report: { kind: "store-error", op: event.op, error: event.error, cause: event.cause },
      });
      if (event.op === "acquire") {
        if (state.phase !== "standby") return state;
        if (event.retryAfterMs === undefined) {
          pollLater(config, now, out);
          return state;
        }
        armStep(out, now.mono + event.retryAfterMs * unitsOf(config));
        const { phase, token, ttlMs, deadlineMono, deadlineWall, attempt } = state;
        return keeperState(phase, token, ttlMs, deadlineMono, deadlineWall, attempt, null);
      } else if (state.phase === "active") {
        // Try again soon; the deadline stops the agent if no retry gets through in time.
        armStep(
          out,
          now.mono + Math.max(RENEW_RETRY_MIN_MS * unitsOf(config), intervalOf(config, state) / 4),
        );
      }
      return state;
    }

    case "stop": {
      if (state.phase === "stopped") return state;
      out.act({ kind: "timer", timer: "step", atMono: null });
      out.act({ kind: "timer", timer: "deadline", atMono: null });
      if (state.phase === "active" && state.token !== null)
        out.act({ kind: "send", op: "release", token: state.token, timeout: graceOf(config, state) });
      const { ttlMs, deadlineMono, deadlineWall, attempt, standbyKey } = state;
      return keeperState("stopped", null, ttlMs, deadlineMono, deadlineWall, attempt, standbyKey);
    }
  }
}
