import type { Logger } from "winston";
import { ComputeApiError, type ComputeApi } from "../../upstream/nova-compute-api.js";
import {
  CLOCK_SKEW_MS,
  PREEMPTED_MAX_AGE_MS,
  preemptedVerdict,
  rebootedSince,
  settledVerdict,
  type Verdict,
} from "../../core/nova-preempted.js";

/** How often the host's servers are read while the watch runs, after its first RESEND_FAST_MS. */
export const RESEND_POLL_MS = 2000;
/**
 * How often they are read in the watch's first RESEND_FAST_MS: nova-compute's start-up
 * cancels the queued reboots seconds after the start, so the poll is what a user waits
 * beyond nova's own start. A verdict read from records that a finishing reboot also shows
 * for a moment (`fenced`, `lost`) is acted on at the second look that agrees: the two
 * looks must straddle nova's save of an instance whose reboot just finished and the
 * event's end, recorded after it (through the conductor: milliseconds, more on a starved
 * host); half a second is the margin kept.
 */
export const RESEND_FAST_POLL_MS = 500;
export const RESEND_FAST_MS = 30_000;
/**
 * How long after the child's start the watch runs: the reboots nova-compute's start-up
 * cancels fail as soon as it consumes its queue, seconds after the start; this leaves room
 * for a slow start (nova's own init of thousands of instances) without watching for ever.
 */
export const RESEND_WATCH_MS = 180_000;

export interface ResendOptions {
  api: ComputeApi;
  /** nova's [DEFAULT]host of the child: the servers looked at are this host's */
  host: string;
  log: Logger;
  /** whether the lease the child runs under is still held: nothing is sent once it is not */
  holds: () => boolean;
  /** when the lease was granted to this host (ms of the epoch) */
  grantedAtMs: number;
  /** ms of the epoch */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** between two looks once the fast ones are over; RESEND_POLL_MS */
  pollMs?: number;
  watchMs?: number;
}

/**
 * After `run` starts nova-compute on a takeover: the reboots nova accepted for this host's
 * servers that the new nova-compute's start-up cancelled (src/core/nova-preempted.ts), each
 * sent once more through the compute API and logged (`preempted-action-resent`). Reboots
 * whose outcome nobody can know (begun by the process that died, before the lease moved)
 * are logged, not sent (`preempted-action-unknown`), as are those never answered by the
 * watch's end. Whether this host's nova-compute consumes its queue yet is read from nova's
 * services only while a reboot waits for an answer. `watch()` runs until `stop()`, the lease is no longer held, or
 * RESEND_WATCH_MS after it began.
 */
export class PreemptedResend {
  /** what was decided per server, by the action it was decided for */
  private readonly decided = new Map<string, string>();
  /** actions still waiting for a compute's answer: server -> request id */
  private readonly pending = new Map<string, string>();
  /** the verdicts of the last look not yet acted on: server -> verdict, acted on when the next look agrees */
  private seen = new Map<string, string>();
  /** since when (our clock) this host's nova-compute has been seen consuming its queue; null until then */
  private consumingSinceMs: number | null = null;
  private stopped = false;

  constructor(private readonly options: ResendOptions) {}

  stop(): void {
    this.stopped = true;
  }

  /** Watch until stopped, the lease is gone or the watch's time is up. */
  async watch(): Promise<void> {
    const { log } = this.options;
    const now = this.options.now ?? Date.now;
    const sleep = this.options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
    const began = now();
    const until = began + (this.options.watchMs ?? RESEND_WATCH_MS);
    let failures = 0;
    while (!this.stopped && this.options.holds() && now() < until) {
      try {
        await this.look(now());
        failures = 0;
      } catch (error) {
        // nova-api or keystone down for a while: said once per run of failures, tried again.
        if (failures++ === 0) log.warn("preempted-watch-error", { error: String(error) });
      }
      await sleep(this.nextLookInMs(now() - began));
    }
    for (const [server, requestId] of this.pending)
      log.warn("preempted-action-unresolved", {
        server,
        request: requestId,
        why: "nova accepted a reboot for this server that no nova-compute answered while run watched: check it",
      });
  }

  /** How long until the next look, `watchedMs` into the watch. */
  private nextLookInMs(watchedMs: number): number {
    return watchedMs < RESEND_FAST_MS ? RESEND_FAST_POLL_MS : (this.options.pollMs ?? RESEND_POLL_MS);
  }

  /** One look at the host's servers changed within the age a cancelled reboot may have. */
  private async look(nowMs: number): Promise<void> {
    const { api, host } = this.options;
    const servers = await api.serversOf(host, nowMs - PREEMPTED_MAX_AGE_MS);
    const seen = new Map<string, string>();
    for (const server of servers) {
      if (this.stopped || !this.options.holds()) return;
      if (server.vmState !== "active") continue;
      const [latest, earlier] = await api.latestActions(server.id, 2);
      if (latest === undefined || this.decided.get(server.id) === latest.requestId) continue;
      const events = latest.action === "reboot" ? await api.events(server.id, latest.requestId) : [];
      if (latest.action === "reboot" && events.length === 0) await this.lookForConsumer(nowMs);
      let verdict = preemptedVerdict(
        server,
        latest,
        events,
        nowMs,
        this.options.grantedAtMs,
        this.consumingSinceMs,
      );
      const earlierEvents =
        verdict.kind === "resend" && earlier?.action === "reboot"
          ? await api.events(server.id, earlier.requestId)
          : [];
      if (rebootedSince(latest, earlier, earlierEvents)) verdict = { kind: "none" };
      if (verdict.kind === "none") {
        // Final for this action (done, failed otherwise, not a reboot): looked at again only
        // once the server has a newer one.
        this.pending.delete(server.id);
        this.decided.set(server.id, latest.requestId);
        continue;
      }
      if (verdict.kind === "pending") {
        this.pending.set(server.id, verdict.requestId);
        continue;
      }
      // Acted on at once when nova's records of it are final, else when two looks, a poll
      // apart, agree (see preemptedVerdict).
      const said = JSON.stringify(verdict);
      if (settledVerdict(verdict, earlier, earlierEvents) || this.seen.get(server.id) === said)
        await this.act(server.id, verdict);
      else seen.set(server.id, said);
    }
    this.seen = seen;
  }

  /**
   * Whether this host's nova-compute consumes its queue: it reported to nova after the
   * lease was granted (nova-compute reports only once its RPC server runs). Remembered once
   * seen.
   */
  private async lookForConsumer(nowMs: number): Promise<void> {
    if (this.consumingSinceMs !== null) return;
    const reportedAt = await this.options.api.computeReportedAt(this.options.host);
    if (reportedAt !== null && reportedAt >= this.options.grantedAtMs + CLOCK_SKEW_MS)
      this.consumingSinceMs = nowMs;
  }

  private async act(server: string, verdict: Exclude<Verdict, { kind: "none" | "pending" }>): Promise<void> {
    const { log } = this.options;
    this.pending.delete(server);
    this.decided.set(server, verdict.requestId);
    if (verdict.kind === "unknown") {
      log.warn("preempted-action-unknown", {
        server,
        request: verdict.requestId,
        why: "a reboot begun by the nova-compute that was replaced never finished: whether it ran is unknown; not sent again",
      });
      return;
    }
    if (!this.options.holds()) return;
    try {
      const request = await this.options.api.reboot(server, verdict.rebootType);
      // The resend is this watch's own action, never judged again: as it finishes it shows,
      // like any reboot, a server with no task and an unfinished event for a moment.
      if (request !== null) this.decided.set(server, request);
      log.info("preempted-action-resent", {
        server,
        action: "reboot",
        type: verdict.rebootType,
        cause: verdict.cause,
        preempted_request: verdict.requestId,
        request,
      });
    } catch (error) {
      // A 409 (locked, or a task began meanwhile) is nova's answer to keep: not tried again.
      if (!(error instanceof ComputeApiError)) this.decided.delete(server);
      log.warn("preempted-action-not-resent", {
        server,
        action: "reboot",
        preempted_request: verdict.requestId,
        error: String(error),
      });
    }
  }
}
