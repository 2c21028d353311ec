import { renewDeadlineMs, renewIntervalMs } from "../domain/lease.js";
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

/** When an event happens, by the agent's two clocks, and a uniform [0,1) draw for jitter. */
export interface KeeperClocks {
  mono: number;
  wall: number;
  random: number;
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
  | { kind: "acquired"; attempt: number; sent: SentAt; outcome: LeaseOutcome }
  | { kind: "renewed"; attempt: number; sent: SentAt; outcome: LeaseOutcome }
  /** no answer in time, or the request failed */
  | { kind: "failed"; attempt: number; op: "acquire" | "renew"; error: string; cause?: unknown }
  | { kind: "stop" };

/** What an agent reports; `LeaseKeeper` emits these as they are. */
export type KeeperReport =
  | { kind: "active"; token: number; ttlMs: number }
  | { kind: "standby"; current: LeaseView | null; reason: RefusalReason }
  | { kind: "lost"; token: number; reason: "refused" | "deadline"; detail: string }
  | { kind: "renewed"; token: number; latencyMs: number }
  | { kind: "store-error"; op: "acquire" | "renew"; error: string; cause?: unknown };

export type KeeperAction =
  /** send this request, give up on it after `timeoutMs`, and answer with `attempt` */
  | { kind: "send"; op: "acquire"; attempt: number; sent: SentAt; timeoutMs: number }
  | { kind: "send"; op: "renew"; attempt: number; token: number; sent: SentAt; timeoutMs: number }
  /** hand back a lease: on stop, or one granted after stop. Nothing answers to the machine. */
  | { kind: "send"; op: "release"; token: number; timeoutMs: number }
  /** (re)arm a timer at a monotonic time; null cancels it */
  | { kind: "timer"; timer: "step" | "deadline"; atMono: number | null }
  | { kind: "report"; report: KeeperReport };

export interface KeeperStep {
  state: KeeperState;
  actions: KeeperAction[];
}

/** A renew that failed is tried again this soon (or a quarter interval, if longer). */
const RENEW_RETRY_MIN_MS = 50;

export function initialKeeperState(config: KeeperConfig): KeeperState {
  return {
    phase: "standby",
    token: null,
    ttlMs: config.ttlMs,
    deadlineMono: 0,
    deadlineWall: 0,
    attempt: 0,
    standbyKey: null,
  };
}

/** Whether the holder may still act at these clock readings. */
export function mayAct(state: KeeperState, mono: number, wall: number): boolean {
  return (
    state.phase === "active" && state.token !== null && mono < state.deadlineMono && wall < state.deadlineWall
  );
}

/** Standbys spread out so they do not poll in lock step: between half and all of `ms`. */
const jittered = (ms: number, random: number) => ms * (0.5 + 0.5 * random);

export function keeperStep(
  config: KeeperConfig,
  state: KeeperState,
  event: KeeperEvent,
  now: KeeperClocks,
): KeeperStep {
  const actions: KeeperAction[] = [];
  const report = (r: KeeperReport) => actions.push({ kind: "report", report: r });
  const armStep = (atMono: number) => actions.push({ kind: "timer", timer: "step", atMono });
  const pollLater = () => armStep(now.mono + jittered(config.standbyPollMs, now.random));
  const grace = (s: KeeperState) => renewDeadlineMs(s.ttlMs);
  const interval = (s: KeeperState) => renewIntervalMs(s.ttlMs);

  /** Stop acting: back to standby, and ask again after a jittered poll. */
  const lose = (s: KeeperState, reason: "refused" | "deadline", detail: string): KeeperState => {
    report({ kind: "lost", token: s.token!, reason, detail });
    actions.push({ kind: "timer", timer: "deadline", atMono: null });
    pollLater();
    return { ...s, phase: "standby", token: null };
  };
  /** The deadline passed (by either clock) while active: lose, else unchanged. */
  const checked = (s: KeeperState): KeeperState =>
    s.phase === "active" && !mayAct(s, now.mono, now.wall)
      ? lose(s, "deadline", "renew deadline passed before a renew succeeded")
      : s;
  /** The deadline runs from when the succeeding request was sent, by each clock. */
  const heldFrom = (s: KeeperState, sent: SentAt): KeeperState => {
    const next = { ...s, deadlineMono: sent.mono + grace(s), deadlineWall: sent.wall + grace(s) };
    actions.push({ kind: "timer", timer: "deadline", atMono: next.deadlineMono });
    armStep(sent.mono + interval(next));
    return next;
  };
  const send = (s: KeeperState, op: "acquire" | "renew"): KeeperState => {
    const next = { ...s, attempt: s.attempt + 1 };
    const sent = { mono: now.mono, wall: now.wall };
    if (op === "acquire")
      actions.push({ kind: "send", op, attempt: next.attempt, sent, timeoutMs: grace(s) });
    else
      actions.push({
        kind: "send",
        op,
        attempt: next.attempt,
        token: s.token!,
        sent,
        // No answer before the deadline is as good as none: the agent stops then anyway.
        timeoutMs: Math.max(1, s.deadlineMono - now.mono),
      });
    return next;
  };

  switch (event.kind) {
    case "start":
      if (state.phase !== "standby") return { state, actions };
      armStep(now.mono);
      return { state, actions };

    case "check":
      return { state: checked(state), actions };

    case "deadline": {
      const next = checked(state);
      // A timer may fire a little early by the monotonic clock: arm it again.
      if (next.phase === "active")
        actions.push({ kind: "timer", timer: "deadline", atMono: next.deadlineMono });
      return { state: next, actions };
    }

    case "step": {
      if (state.phase === "standby") return { state: send(state, "acquire"), actions };
      if (state.phase !== "active") return { state, actions };
      const held = checked(state);
      return { state: held.phase === "active" ? send(held, "renew") : held, actions };
    }

    case "acquired": {
      const { outcome } = event;
      if (state.phase === "stopped") {
        // Stopped while this acquire was in flight: hand a granted lease straight back, so
        // a standby does not wait a whole TTL for a lease nobody uses.
        if (outcome.ok)
          actions.push({ kind: "send", op: "release", token: outcome.token, timeoutMs: grace(state) });
        return { state, actions };
      }
      if (event.attempt !== state.attempt || state.phase !== "standby") return { state, actions };
      if (outcome.ok) {
        const adopted = { ...state, ttlMs: Math.min(config.ttlMs, outcome.ttlMs) };
        if (now.mono >= event.sent.mono + grace(adopted) || now.wall >= event.sent.wall + grace(adopted)) {
          // Granted, but the answer came too late to act on (the agent was frozen): the
          // lease runs out unrenewed, and the agent asks again.
          pollLater();
          return { state, actions };
        }
        report({ kind: "active", token: outcome.token, ttlMs: outcome.ttlMs });
        const active = heldFrom(
          { ...adopted, phase: "active", token: outcome.token, standbyKey: null },
          event.sent,
        );
        return { state: active, actions };
      }
      const current = outcome.current;
      const standbyKey = `${outcome.reason}:${current?.holder ?? ""}`;
      if (standbyKey !== state.standbyKey) report({ kind: "standby", current, reason: outcome.reason });
      // Come back when the holder's lease would run out (or the store's recovery wait is
      // over), or sooner, to catch a release.
      const untilFree = current !== null ? current.ttlMs + 1 : (outcome.retryAfterMs ?? config.standbyPollMs);
      armStep(now.mono + Math.min(untilFree, jittered(config.standbyPollMs, now.random)));
      return { state: { ...state, standbyKey }, actions };
    }

    case "renewed": {
      if (event.attempt !== state.attempt || state.phase !== "active") return { state, actions };
      const { outcome } = event;
      if (!outcome.ok) {
        const holder = outcome.current ? ` (holder ${outcome.current.holder})` : "";
        return { state: lose(state, "refused", `renew refused: ${outcome.reason}${holder}`), actions };
      }
      const held = heldFrom({ ...state, ttlMs: Math.min(config.ttlMs, outcome.ttlMs) }, event.sent);
      report({ kind: "renewed", token: state.token!, latencyMs: now.mono - event.sent.mono });
      return { state: held, actions };
    }

    case "failed": {
      if (event.attempt !== state.attempt) return { state, actions };
      report({ kind: "store-error", op: event.op, error: event.error, cause: event.cause });
      if (event.op === "acquire") {
        if (state.phase === "standby") pollLater();
      } else if (state.phase === "active") {
        // Try again soon; the deadline stops the agent if no retry gets through in time.
        armStep(now.mono + Math.max(RENEW_RETRY_MIN_MS, interval(state) / 4));
      }
      return { state, actions };
    }

    case "stop": {
      if (state.phase === "stopped") return { state, actions };
      actions.push(
        { kind: "timer", timer: "step", atMono: null },
        { kind: "timer", timer: "deadline", atMono: null },
      );
      if (state.phase === "active" && state.token !== null)
        actions.push({ kind: "send", op: "release", token: state.token, timeoutMs: grace(state) });
      return { state: { ...state, phase: "stopped", token: null }, actions };
    }
  }
}
