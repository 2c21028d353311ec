import { EventEmitter } from "node:events";
import { renewDeadlineMs, renewIntervalMs } from "../domain/lease.js";
import type { LeaseOutcome, LeaseView, RefusalReason, ReleaseOutcome } from "../lease/machine.js";

/** What the keeper needs from a lease service: the Store, or (later) the HTTP client. */
export interface LeaseClient {
  acquire(req: { shard: string; agent: string; ttlMs: number }): Promise<LeaseOutcome>;
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
  /** monotonic milliseconds; default performance.now */
  monotonicNow?: () => number;
  /**
   * wall-clock milliseconds; default Date.now. Only ever makes the agent stop sooner: the
   * monotonic clock does not advance while a host is suspended or a VM is paused, the
   * wall clock does, so the agent stops when either says the deadline has passed.
   */
  wallNow?: () => number;
  /** uniform [0,1) for jitter; injectable for reproducible runs */
  random?: () => number;
}

export type KeeperState = "standby" | "active" | "stopped";

export interface KeeperEvents {
  /** this agent now holds the lease and may act under `token` */
  active: [{ token: number; ttlMs: number }];
  /** another agent holds the lease, or the store is recovering (emitted on change) */
  standby: [{ current: LeaseView | null; reason: RefusalReason }];
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

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CallTimeout(`no answer within ${Math.round(ms)} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Keeps one agent's lease on one shard: acquires it or waits as a standby with jittered
 * polling, renews every TTL/3, and stops acting on its own when its monotonic clock
 * passes the renew deadline — 2/3 TTL after the last renew it sent that succeeded —
 * without needing to reach anyone. The store starts the TTL no earlier than the agent
 * sent the request, so the agent always stops at least TTL/3 before any other agent can
 * be granted the lease, whatever the network did.
 *
 * Callers act only while `token()` returns a token; it re-checks the deadline on every
 * call, so even an agent that was frozen (SIGSTOP, a long GC) and whose timers have not
 * fired yet sees that it must stop.
 */
export class LeaseKeeper extends EventEmitter<KeeperEvents> {
  private state: KeeperState = "standby";
  private heldToken: number | null = null;
  private deadline = 0;
  private wallDeadline = 0;
  private timer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** why and behind whom we last stood by, to report only changes */
  private lastStandbyKey: string | undefined;
  private readonly now: () => number;
  private readonly wallNow: () => number;
  private readonly random: () => number;
  /** renew interval and deadline, from the shorter of the asked and the granted TTL */
  private intervalMs: number;
  private graceMs: number;
  private readonly pollMs: number;

  constructor(private readonly options: LeaseKeeperOptions) {
    super();
    this.now = options.monotonicNow ?? (() => performance.now());
    this.wallNow = options.wallNow ?? Date.now;
    this.random = options.random ?? Math.random;
    this.intervalMs = renewIntervalMs(options.ttlMs);
    this.graceMs = renewDeadlineMs(options.ttlMs);
    this.pollMs = options.standbyPollMs ?? 500;
  }

  get status(): KeeperState {
    return this.state;
  }

  /** The token to act under, or null when this agent must not act right now. */
  token(): number | null {
    if (this.state !== "active" || this.heldToken === null) return null;
    if (this.now() >= this.deadline || this.wallNow() >= this.wallDeadline) {
      this.lose("deadline", "renew deadline passed before a renew succeeded");
      return null;
    }
    return this.heldToken;
  }

  start(): this {
    this.schedule(0, () => this.tryAcquire());
    return this;
  }

  /** Stop for good; when active, hand the lease back so a standby takes over at once. */
  async stop(): Promise<void> {
    const token = this.state === "active" ? this.heldToken : null;
    this.state = "stopped";
    this.heldToken = null;
    clearTimeout(this.timer);
    clearTimeout(this.deadlineTimer);
    if (token === null) return;
    try {
      const { shard, agent } = this.options;
      await withTimeout(this.options.client.release({ shard, agent, token }), this.graceMs);
      this.emit("released", { token });
    } catch (error) {
      this.emit("store-error", { op: "release", error: String(error), cause: error });
    }
  }

  private schedule(delayMs: number, step: () => Promise<void>): void {
    clearTimeout(this.timer);
    if (this.state === "stopped") return;
    this.timer = setTimeout(() => void step(), Math.max(0, delayMs));
  }

  /** Spread standbys out so they do not poll in lock step. */
  private jitter(ms: number): number {
    return ms * (0.5 + 0.5 * this.random());
  }

  private async tryAcquire(): Promise<void> {
    const { client, shard, agent, ttlMs } = this.options;
    const sentAt = this.now();
    const sentWall = this.wallNow();
    let outcome: LeaseOutcome;
    try {
      outcome = await withTimeout(client.acquire({ shard, agent, ttlMs }), this.graceMs);
    } catch (error) {
      this.emit("store-error", { op: "acquire", error: String(error), cause: error });
      this.schedule(this.jitter(this.pollMs), () => this.tryAcquire());
      return;
    }
    if (this.state === "stopped" && outcome.ok) {
      // stop() ran while this acquire was in flight: hand the lease straight back so a
      // standby does not wait a whole TTL for a lease nobody uses.
      await client.release({ shard, agent, token: outcome.token }).catch(() => undefined);
      return;
    }
    if (this.state !== "standby") return;
    if (outcome.ok) {
      this.becomeActive(outcome.token, outcome.ttlMs, sentAt, sentWall);
      return;
    }
    const current = outcome.current;
    const standbyKey = `${outcome.reason}:${current?.holder ?? ""}`;
    if (standbyKey !== this.lastStandbyKey) {
      this.lastStandbyKey = standbyKey;
      this.emit("standby", { current, reason: outcome.reason });
    }
    // Come back when the holder's lease would run out (or the store's recovery wait is
    // over), or sooner, to catch a release.
    const untilFree = current !== null ? current.ttlMs + 1 : (outcome.retryAfterMs ?? this.pollMs);
    this.schedule(Math.min(untilFree, this.jitter(this.pollMs)), () => this.tryAcquire());
  }

  /**
   * Time ourselves by the TTL the store granted when it is shorter than the one asked
   * for: over HTTP the shard's definition decides the TTL, not the agent.
   */
  private adoptTtl(grantedTtlMs: number): void {
    const ttlMs = Math.min(this.options.ttlMs, grantedTtlMs);
    this.intervalMs = renewIntervalMs(ttlMs);
    this.graceMs = renewDeadlineMs(ttlMs);
  }

  private becomeActive(token: number, ttlMs: number, sentAt: number, sentWall: number): void {
    this.state = "active";
    this.heldToken = token;
    this.lastStandbyKey = undefined;
    this.adoptTtl(ttlMs);
    this.extendDeadline(sentAt, sentWall);
    this.emit("active", { token, ttlMs });
    this.schedule(sentAt + this.intervalMs - this.now(), () => this.renew());
  }

  private extendDeadline(sentAt: number, sentWall: number): void {
    this.deadline = sentAt + this.graceMs;
    this.wallDeadline = sentWall + this.graceMs;
    this.armDeadlineTimer();
  }

  /**
   * Report the loss at the deadline even when nobody calls token(). Timers may fire a
   * little early by the monotonic clock, so re-arm until the deadline has really passed.
   */
  private armDeadlineTimer(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(
      () => {
        if (this.token() !== null) this.armDeadlineTimer();
      },
      Math.max(1, this.deadline - this.now()),
    );
  }

  private async renew(): Promise<void> {
    const token = this.token();
    if (token === null) return;
    const { client, shard, agent, ttlMs } = this.options;
    const sentAt = this.now();
    const sentWall = this.wallNow();
    let outcome: LeaseOutcome;
    try {
      outcome = await withTimeout(
        client.renew({ shard, agent, token, ttlMs }),
        Math.max(1, this.deadline - sentAt),
      );
    } catch (error) {
      this.emit("store-error", { op: "renew", error: String(error), cause: error });
      // Retry soon; the deadline timer stops us if no retry gets through in time.
      if (this.heldToken === token) this.schedule(Math.max(50, this.intervalMs / 4), () => this.renew());
      return;
    }
    if (this.heldToken !== token || this.state !== "active") return; // lost meanwhile
    if (!outcome.ok) {
      const holder = outcome.current ? ` (holder ${outcome.current.holder})` : "";
      this.lose("refused", `renew refused: ${outcome.reason}${holder}`);
      return;
    }
    this.adoptTtl(outcome.ttlMs);
    this.extendDeadline(sentAt, sentWall);
    this.emit("renewed", { token, latencyMs: this.now() - sentAt });
    this.schedule(sentAt + this.intervalMs - this.now(), () => this.renew());
  }

  private lose(reason: "refused" | "deadline", detail: string): void {
    const token = this.heldToken;
    if (this.state !== "active" || token === null) return;
    this.state = "standby";
    this.heldToken = null;
    clearTimeout(this.deadlineTimer);
    this.emit("lost", { token, reason, detail });
    this.schedule(this.jitter(this.pollMs), () => this.tryAcquire());
  }
}
