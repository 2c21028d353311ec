/**
 * Which of a server's instance actions nova-compute's own start-up cancelled, and what to
 * send again for it. Pure: the records as the compute API shows them, and the clock.
 *
 * Why: nova-api takes a reboot (answers 202, sets the task state `rebooting` or
 * `rebooting_hard`) and casts it to the host's queue in RabbitMQ. When that host's
 * nova-compute is replaced (a failover) before it took the message, the new process's
 * start-up (`ComputeManager._init_instance`) finds the task state on a running instance and
 * clears it ("Instance in transitional state (rebooting_hard) at start-up and power state is
 * (1), clearing task state"); the queued reboot then reaches it and fails the task-state
 * check (`UnexpectedTaskStateError`: "Conflict updating instance ... Expected:
 * {'task_state': ['rebooting_hard', ...]}. Actual: {'task_state': None}"). The user had a
 * 202 and nothing happened. nova 34 clears the same way `pausing` and `unpausing` (which
 * nova's ironic driver does not implement), and `reboot_started(_hard)` (a reboot the
 * old process had begun: its outcome is unknown). It retries by itself a reboot pending
 * or caught with the power off, a stop (`powering-off`) and a start (`powering-on`), and
 * restarts a delete; it sets a boot caught in flight to ERROR, and a rebuild taken during the
 * outage (begun or only queued), whose queued request then leaves the server in REBUILD with
 * `vm_state` error and drops its allocation. Not resent: that takes resetting the server's
 * state, which an operator judges (docs/OPERATIONS.md, "Instances through a failover").
 *
 * The rule: a reboot is sent again when it is the server's latest action, its compute
 * event failed with exactly that conflict (expected a reboot's task states, found none),
 * the failure is recent, and the server is active with no task now; or when it was begun,
 * never finished, by the old host's process after the lease had moved (the fence refused
 * its calls), which an event begun then shows by staying unfinished for longer than the new
 * process's own could (ABANDONED_AFTER_MS); or when no compute ever answered it (no event),
 * its task state was cleared by a start-up, and this host's nova-compute has been
 * consuming its queue for LOST_AFTER_MS: the message was taken by the old host's process,
 * frozen and resumed, which was killed before it recorded the event (nova records the
 * event before it calls Ironic, so no event means the node was not touched). "Latest"
 * makes it once: the resend is a newer action, and a user's own newer action supersedes it.
 *
 * A resend can meet the original after all (still queued when we sent): nova-compute runs an
 * instance's reboots one at a time, each checking the task state first, so the second finds
 * the state the first cleared and fails on it. One reboot is carried out either way.
 */

/** An instance action of a server, as `GET /servers/{id}/os-instance-actions` lists it. */
export interface InstanceAction {
  action: string;
  requestId: string;
  /** nova's time: UTC, no zone (2026-12-06T07:12:03.000000) */
  startTime: string;
}

/** One event of an instance action (microversion 2.84: `details` to an admin). */
export interface InstanceActionEvent {
  event: string;
  /** "Success", "Error", or null while under way */
  result: string | null;
  startTime: string;
  finishTime: string | null;
  details: string | null;
}

/** A server now, as `GET /servers/detail` shows it. */
export interface ServerState {
  id: string;
  vmState: string;
  taskState: string | null;
}

export type RebootType = "HARD" | "SOFT";

/**
 * Why a reboot is sent again: `cancelled` — failed on the task state a start-up cleared;
 * `fenced` — begun after the lease moved by the old host's process, refused at the fence;
 * `lost` — no compute answered it, its task state cleared, the new one consuming its queue.
 */
export type ResendCause = "cancelled" | "fenced" | "lost";

export type Verdict =
  /** not carried out by any compute: send it again */
  | { kind: "resend"; requestId: string; rebootType: RebootType; cause: ResendCause }
  /** begun by a process that is gone, never finished, its task cleared: whether it ran is unknown */
  | { kind: "unknown"; requestId: string }
  /** no compute has answered it yet: look again */
  | { kind: "pending"; requestId: string }
  /** nothing to do for this action */
  | { kind: "none" };

/** The event nova-compute records for a reboot. */
export const REBOOT_EVENT = "compute_reboot_instance";

/** How old a cancelled reboot may be and still be sent again (older ones are an operator's call). */
export const PREEMPTED_MAX_AGE_MS = 10 * 60_000;

/**
 * How far apart two hosts' clocks may be (NTP keeps them within milliseconds): a reboot
 * begun this long after the lease was granted to the new host was begun by a process the
 * fence already refused.
 */
export const CLOCK_SKEW_MS = 1000;

/**
 * How long this host's nova-compute must have been consuming its queue before a reboot no
 * compute answered is taken as lost: a message still queued reaches a consuming process at
 * once, and its event is recorded within a second or two (a conductor call).
 */
export const LOST_AFTER_MS = 20_000;

/**
 * How long a reboot's event begun after the grant may stay unfinished, its task state
 * cleared, and still be the new nova-compute's own: a queued reboot that reaches it just
 * after its start is recorded first, then fails on the task state its start-up cleared
 * once neutron and Ironic have answered (`reboot_instance` records its event before those
 * calls), seconds later on a busy host. Unfinished for longer, it was begun by the old
 * host's process, which was killed before it could end it.
 */
export const ABANDONED_AFTER_MS = 10_000;

/**
 * nova's UnexpectedTaskStateError on a reboot whose task state was cleared: the states it
 * expected (a reboot's), and None found.
 */
const CLEARED = /Expected: \{'task_state': \[([^\]]*)\]\}\. Actual: \{'task_state': None\}/;

/** nova's time (UTC without a zone, or with one) in ms of the epoch; NaN when unreadable. */
export function novaTimeMs(time: string): number {
  return Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(time) ? time : `${time}Z`);
}

/** The reboot's type from the task states nova expected: a hard reboot's list names `rebooting_hard`. */
export function rebootTypeOf(expected: string): RebootType | null {
  if (expected.includes("'rebooting_hard'")) return "HARD";
  if (expected.includes("'rebooting'")) return "SOFT";
  return null;
}

/**
 * Whether a reboot was carried out after `asked` was: `earlier` (the action before it) a
 * reboot whose compute event succeeded once `asked` had been taken — two reboots asked
 * close together, one run, the other failing on the task state the first cleared. The
 * user's reboot happened: nothing to send.
 */
export function rebootedSince(
  asked: InstanceAction,
  earlier: InstanceAction | undefined,
  earlierEvents: readonly InstanceActionEvent[],
): boolean {
  if (earlier === undefined || earlier.action !== "reboot") return false;
  const done = earlierEvents.find((e) => e.event === REBOOT_EVENT && e.result === "Success");
  return done?.finishTime != null && novaTimeMs(done.finishTime) >= novaTimeMs(asked.startTime);
}

/**
 * Whether `verdict` stands on records nova never changes afterwards, so that it may be acted
 * on at the first look: a reboot whose compute event failed on the task state a start-up
 * cleared was never carried out, and no reboot asked before it is still finishing (one that
 * is would clear the task state as it ends and might yet be the one carried out: see
 * rebootedSince). `earlier` is the action before the verdict's, `earlierEvents` its events.
 */
export function settledVerdict(
  verdict: Verdict,
  earlier: InstanceAction | undefined,
  earlierEvents: readonly InstanceActionEvent[],
): boolean {
  if (verdict.kind !== "resend" || verdict.cause !== "cancelled") return false;
  if (earlier === undefined || earlier.action !== "reboot") return true;
  const event = earlierEvents.find((e) => e.event === REBOOT_EVENT);
  return event !== undefined && event.finishTime !== null;
}

/**
 * What to do about `latest`, the server's newest action, given its events, the server as
 * it is now, and `nowMs` (ms of the epoch). A `cancelled` resend stands on a finished event
 * and may be acted on at once; any other verdict but "pending" only when the next look
 * gives it again: a reboot that just succeeded shows, for a moment, a server with no task
 * and an event not yet finished (nova saves the instance before the event).
 */
export function preemptedVerdict(
  server: ServerState,
  latest: InstanceAction | undefined,
  events: readonly InstanceActionEvent[],
  nowMs: number,
  /** when this host was granted the lease its nova-compute runs under (ms of the epoch) */
  grantedAtMs: number,
  /**
   * since when this host's nova-compute has been seen consuming its queue (its service
   * reported after the grant), by `nowMs`'s clock; null while it has not been seen to
   */
  consumingSinceMs: number | null = null,
): Verdict {
  if (latest === undefined || latest.action !== "reboot") return { kind: "none" };
  const { requestId } = latest;
  const event = events.find((e) => e.event === REBOOT_EVENT);
  if (event === undefined) {
    // No compute has recorded taking it. While the task state nova-api set is there, it is
    // queued for the new process. Once a start-up cleared it and the new process has long
    // been consuming its queue, the message is gone: taken by the old process after it
    // resumed, which died before recording the event (and before calling Ironic). nova
    // keeps no reboot's type but in the task state that was cleared: HARD, what is asked of
    // a server that does not answer.
    const lost =
      server.taskState === null &&
      server.vmState === "active" &&
      consumingSinceMs !== null &&
      nowMs - consumingSinceMs >= LOST_AFTER_MS &&
      nowMs - novaTimeMs(latest.startTime) <= PREEMPTED_MAX_AGE_MS;
    return lost
      ? { kind: "resend", requestId, rebootType: "HARD", cause: "lost" }
      : { kind: "pending", requestId };
  }
  if (event.result === null) {
    // Under way on a compute now: its task state says so.
    if (server.taskState !== null) return { kind: "pending", requestId };
    // Its task state cleared by the new process's start-up. Begun after this host was
    // granted the lease, it is the new process's own until it has stayed unfinished for
    // ABANDONED_AFTER_MS (it will fail on that cleared state); then it was the old host's
    // nova-compute, frozen and resumed, whose Ironic calls the fence refused: it never
    // reached the node. nova records no reboot's type but in the task state that start-up
    // cleared: HARD, what is asked of a server that does not answer. Begun before the grant
    // by a process that is gone, it may have power cycled the node: whether it did is unknown.
    const begunMs = novaTimeMs(event.startTime);
    if (!(begunMs >= grantedAtMs + CLOCK_SKEW_MS)) return { kind: "unknown", requestId };
    if (nowMs - begunMs < ABANDONED_AFTER_MS) return { kind: "pending", requestId };
    if (nowMs - begunMs <= PREEMPTED_MAX_AGE_MS && server.vmState === "active")
      return { kind: "resend", requestId, rebootType: "HARD", cause: "fenced" };
    return { kind: "unknown", requestId };
  }
  if (event.result !== "Error" || event.finishTime === null) return { kind: "none" };
  const cleared = CLEARED.exec(event.details ?? "");
  const rebootType = cleared === null ? null : rebootTypeOf(cleared[1]!);
  if (rebootType === null) return { kind: "none" };
  const age = nowMs - novaTimeMs(event.finishTime);
  if (!(age <= PREEMPTED_MAX_AGE_MS)) return { kind: "none" };
  // nova-api refuses a reboot of a server with a task under way (409), and one resent while
  // a user's action is running would be a second one.
  if (server.vmState !== "active" || server.taskState !== null) return { kind: "none" };
  return { kind: "resend", requestId, rebootType, cause: "cancelled" };
}
