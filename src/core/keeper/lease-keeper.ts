import { EventEmitter } from "node:events";
import { LEASE_TTL_MAX_MS, renewDeadlineMs } from "../lease/bounds.js";
import type { LeaseOutcome, LeaseView, RefusalReason, ReleaseOutcome } from "../lease/machine.js";
import {
  initialKeeperState,
  keeperStep,
  mayAct,
  type KeeperAction,
  type KeeperConfig,
  type KeeperEvent,
  type KeeperPhase,
  type KeeperState,
} from "./machine.js";
import { realScheduler, type KeeperScheduler, type KeeperTimer } from "./scheduler.js";

/** An acquire: `waitMs` only where the client waits (the bridge over HTTP), never to the Store. */
export interface AcquireArgs {
  shard: string;
  agent: string;
  ttlMs?: number;
  waitMs?: number;
}

/** An acquire's outcome; `waitedMs` when the bridge waited (see LeaseWaits). */
export type WaitedLeaseOutcome = LeaseOutcome & { waitedMs?: number };

/** What the keeper needs from a lease service: the Store itself, or the bridge over HTTP (agent/bridge-client.ts). */
export interface LeaseClient {
  acquire(req: { shard: string; agent: string; ttlMs: number; waitMs?: number }): Promise<WaitedLeaseOutcome>;
  renew(req: { shard: string; agent: string; token: number; ttlMs: number }): Promise<LeaseOutcome>;
  release(req: { shard: string; agent: string; token: number }): Promise<ReleaseOutcome>;
}

export interface LeaseKeeperOptions {
  client: LeaseClient;
  shard: string;
  agent: string;
  /** the TTL to ask for; where the store grants a shorter one (a shard's definition), that one rules */
  ttlMs: number;
  /** longest a standby waits between attempts, before jitter (default 500 ms) */
  standbyPollMs?: number;
  /** a standby's acquire waits this long at the bridge (`wait_ms`); none: it polls (see KeeperConfig) */
  waitMs?: number;
  /**
   * The clocks and timers the keeper runs on (see KeeperScheduler); default the process's
   * (`realScheduler`), or `monotonicNow` and `wallNow` below over the process's timers.
   */
  scheduler?: KeeperScheduler;
  /** monotonic milliseconds; default performance.now (ignored with `scheduler`) */
  monotonicNow?: () => number;
  /**
   * wall-clock milliseconds; default Date.now (ignored with `scheduler`). Only ever makes
   * the agent stop sooner: the monotonic clock does not advance while a host is suspended
   * or a VM is paused, the wall clock does, so the agent stops when either says the
   * deadline has passed.
   */
  wallNow?: () => number;
  /** uniform [0,1) for jitter, drawn only when the rules use a draw; injectable for reproducible runs */
  random?: () => number;
  /**
   * How long to wait after an acquire that failed with `cause` before the next (ms), or
   * undefined for a standby's poll: the agent's own back-off (see UndefinedShard).
   */
  retryAfterMs?: (cause: unknown) => number | undefined;
}

export interface KeeperEvents {
  /**
   * this agent now holds the lease and may act under `token`; `fenceKey`, where the store
   * minted one, proves it at the fenced Ironic endpoint
   */
  active: [{ token: number; ttlMs: number; fenceKey: string | null }];
  /** another agent holds the lease, or the store is recovering (emitted on change) */
  standby: [{ current: LeaseView | null; reason: RefusalReason; retryAfterMs?: number }];
  /** this agent stopped acting: the store refused a renew, or the renew deadline passed */
  lost: [{ token: number; reason: "refused" | "deadline"; detail: string }];
  /** a renew succeeded; `latencyMs` is the round trip */
  renewed: [{ token: number; latencyMs: number }];
  /** the lease was handed back on stop */
  released: [{ token: number }];
  /** the store could not be reached or answered with an error; the keeper carries on */
  "store-error": [{ op: "acquire" | "renew" | "release"; error: string; cause: unknown }];
}

class CallTimeout extends Error {}

/** `promise`, or a CallTimeout once `scheduler`'s clock has moved `timeout` (its units) on. */
function withTimeout<T>(promise: Promise<T>, timeout: number, scheduler: KeeperScheduler): Promise<T> {
  let timer: KeeperTimer | undefined;
  const expired = new Promise<never>((_, reject) => {
    const ms = Math.round(timeout / scheduler.unitsPerMs);
    timer = scheduler.setTimer(timeout, () => reject(new CallTimeout(`no answer within ${ms} ms`)));
  });
  return Promise.race([promise, expired]).finally(() => timer?.cancel());
}

/**
 * Keeps one agent's lease on one shard: the rules of `keeper-machine.ts`, driven with the
 * timers and clocks of a KeeperScheduler (the process's, or a simulator's) and a
 * LeaseClient (the store itself, or the bridge over HTTP). Standbys poll with jitter; the
 * holder renews every TTL/3 and stops acting on its own at the renew deadline.
 *
 * Callers act only while `token()` returns a token; it re-checks the deadline on every
 * call, so even an agent that was frozen (SIGSTOP, a long GC) and whose timers have not
 * fired yet sees that it must stop.
 */
export class LeaseKeeper extends EventEmitter<KeeperEvents> {
  private state: KeeperState;
  private readonly config: KeeperConfig;
  private readonly timers: Record<"step" | "deadline", KeeperTimer | undefined> = {
    step: undefined,
    deadline: undefined,
  };
  private readonly scheduler: KeeperScheduler;
  /** the clocks an event is stepped at; `random` draws on reading, so only draws the rules use are taken */
  private readonly clocks: { mono: number; wall: number; readonly random: number };
  /** releases sent and not yet answered: stop() waits for them */
  private readonly releasing = new Set<Promise<void>>();

  constructor(private readonly options: LeaseKeeperOptions) {
    super();
    this.scheduler = options.scheduler ?? realScheduler(options.monotonicNow, options.wallNow);
    const random = options.random ?? Math.random;
    this.clocks = {
      mono: 0,
      wall: 0,
      get random(): number {
        return random();
      },
    };
    // The machine computes in the scheduler's clock units.
    this.config = {
      ttlMs: options.ttlMs,
      standbyPollMs: options.standbyPollMs ?? 500,
      unitsPerMs: this.scheduler.unitsPerMs,
      ...(options.waitMs !== undefined && { waitMs: options.waitMs }),
    };
    this.state = initialKeeperState(this.config);
  }

  get status(): KeeperPhase {
    return this.state.phase;
  }

  /** The token to act under, or null when this agent must not act right now. */
  token(): number | null {
    if (this.state.phase !== "active") return null;
    this.dispatch({ kind: "check" });
    return mayAct(this.state, this.scheduler.monotonicNow(), this.scheduler.wallNow())
      ? this.state.token
      : null;
  }

  /**
   * Milliseconds this agent may still act for, by the sooner of its two clocks; null
   * when it must not act. What a watchdog is armed with.
   */
  msLeft(): number | null {
    if (this.token() === null) return null;
    return this.untilDeadline() / this.scheduler.unitsPerMs;
  }

  /**
   * Milliseconds until the store may first grant the lease to another agent: TTL after the
   * last renew sent that succeeded (the deadline is 2/3 of the way there), by the sooner of
   * the two clocks; negative once that has passed, and meaningless before a lease was held.
   * Whatever this agent runs under the lease must be gone by then.
   */
  msUntilExpiry(): number {
    const pastDeadline = this.state.ttlMs - renewDeadlineMs(this.state.ttlMs);
    return this.untilDeadline() / this.scheduler.unitsPerMs + pastDeadline;
  }

  /** Clock units to the renew deadline, by the sooner of the two clocks. */
  private untilDeadline(): number {
    const { scheduler, state } = this;
    return Math.min(state.deadlineMono - scheduler.monotonicNow(), state.deadlineWall - scheduler.wallNow());
  }

  /** The TTL the keeper times itself by: the shorter of the asked and the granted. */
  get ttlMs(): number {
    return this.state.ttlMs;
  }

  start(): this {
    this.dispatch({ kind: "start" });
    return this;
  }

  /** Stop for good; when active, hand the lease back so a standby takes over at once. */
  async stop(): Promise<void> {
    this.dispatch({ kind: "stop" });
    await Promise.all(this.releasing);
  }

  private dispatch(event: KeeperEvent): void {
    const { clocks, scheduler } = this;
    clocks.mono = scheduler.monotonicNow();
    clocks.wall = scheduler.wallNow();
    const step = keeperStep(this.config, this.state, event, clocks);
    this.state = step.state;
    for (const action of step.actions) this.perform(action);
  }

  private perform(action: KeeperAction): void {
    switch (action.kind) {
      case "report": {
        // Each report is one of KeeperEvents, its fields the event's payload.
        const { kind, ...detail } = action.report;
        this.emit(kind, detail as never);
        return;
      }
      case "timer": {
        this.timers[action.timer]?.cancel();
        this.timers[action.timer] = undefined;
        if (action.atMono === null) return;
        const event: KeeperEvent = action.timer === "step" ? { kind: "step" } : { kind: "deadline" };
        // A deadline timer waits at least a millisecond: one firing early re-arms (see the machine).
        const least = action.timer === "deadline" ? this.scheduler.unitsPerMs : 0;
        this.timers[action.timer] = this.scheduler.setTimer(
          Math.max(least, action.atMono - this.scheduler.monotonicNow()),
          () => this.dispatch(event),
        );
        return;
      }
      case "send":
        if (action.op === "release") return this.release(action.token, action.timeout);
        return this.send(action);
    }
  }

  private send(action: Extract<KeeperAction, { kind: "send"; op: "acquire" | "renew" }>): void {
    const { client, shard, agent, ttlMs } = this.options;
    const call: Promise<WaitedLeaseOutcome> =
      action.op === "acquire"
        ? client.acquire(
            action.waitMs > 0 ? { shard, agent, ttlMs, waitMs: action.waitMs } : { shard, agent, ttlMs },
          )
        : client.renew({ shard, agent, token: action.token, ttlMs });
    withTimeout(call, action.timeout, this.scheduler).then(
      (outcome) =>
        this.dispatch(
          action.op === "acquire"
            ? {
                kind: "acquired",
                attempt: action.attempt,
                sent: action.sent,
                outcome,
                waitedMs: outcome.waitedMs,
              }
            : { kind: "renewed", attempt: action.attempt, sent: action.sent, outcome },
        ),
      (error: unknown) => {
        const retryAfterMs = action.op === "acquire" ? this.options.retryAfterMs?.(error) : undefined;
        this.dispatch({
          kind: "failed",
          attempt: action.attempt,
          op: action.op,
          error: String(error),
          cause: error,
          ...(retryAfterMs !== undefined && { retryAfterMs }),
        });
      },
    );
  }

  private release(token: number, timeout: number): void {
    const { client, shard, agent } = this.options;
    const done = withTimeout(client.release({ shard, agent, token }), timeout, this.scheduler).then(
      () => void this.emit("released", { token }),
      (error: unknown) =>
        void this.emit("store-error", { op: "release", error: String(error), cause: error }),
    );
    this.releasing.add(done);
    void done.finally(() => this.releasing.delete(done));
  }
}

/** How long a standby's acquire waits at the bridge: the longest the bridge allows, the fewest requests. */
export const STANDBY_WAIT_MS = 30_000;

/**
 * The keeper an agent process runs for its shard over the bridge: it asks for the longest
 * TTL (the shard's definition decides, and the keeper times itself by what it is granted)
 * and, standing by, waits at the bridge for the lease (`waitMs`, default STANDBY_WAIT_MS;
 * 0: poll), or — a bridge that does not wait — polls as often as `standbyPollMs` says
 * (default 500 ms).
 */
export function bridgeKeeper(
  client: LeaseClient,
  shard: string,
  agent: string,
  standbyPollMs?: number,
  retryAfterMs?: (cause: unknown) => number | undefined,
  waitMs = STANDBY_WAIT_MS,
): LeaseKeeper {
  return new LeaseKeeper({
    client,
    shard,
    agent,
    ttlMs: LEASE_TTL_MAX_MS,
    waitMs,
    ...(standbyPollMs !== undefined && { standbyPollMs }),
    ...(retryAfterMs !== undefined && { retryAfterMs }),
  });
}
