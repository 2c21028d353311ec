import { expect } from "chai";
import fc from "fast-check";
import {
  ABANDONED_AFTER_MS,
  CLOCK_SKEW_MS,
  LOST_AFTER_MS,
  PREEMPTED_MAX_AGE_MS,
  novaTimeMs,
  preemptedVerdict,
  REBOOT_EVENT,
  rebootedSince,
  settledVerdict,
  type InstanceActionEvent,
  type ServerState,
} from "../../src/core/nova-preempted.js";

/*
 * Which reboots nova-compute's start-up cancelled (src/core/nova-preempted.ts), on the records
 * the compute API shows. The details are nova 34's words (UnexpectedTaskStateError, as
 * nova-instances-run.test.ts reads them from a real nova after a failover).
 */

const NOW = Date.parse("2026-12-06T07:30:00Z");
/** the new host granted the lease: after the reboot was asked, before its start-up cleared it */
const GRANTED = Date.parse("2026-12-06T07:29:52Z");
const idle: ServerState = { id: "s", vmState: "active", taskState: null };
const reboot = { action: "reboot", requestId: "req-1", startTime: "2026-12-06T07:29:50.000000" };
const cleared = (expected: string): InstanceActionEvent => ({
  event: REBOOT_EVENT,
  result: "Error",
  startTime: "2026-12-06T07:29:55.000000",
  finishTime: "2026-12-06T07:29:55.000000",
  details:
    `Conflict updating instance 0b7c0d1e-1f3a-4a53-9f0e-6a1c2d3e4f50. Expected: {'task_state': [${expected}]}. ` +
    "Actual: {'task_state': None}",
});
/** A time as nova writes it: UTC, no zone. */
const novaTime = (ms: number) => new Date(ms).toISOString().replace("Z", "");
const HARD = "'rebooting_hard', 'reboot_pending_hard', 'reboot_started_hard'";
const SOFT = "'rebooting', 'reboot_pending', 'reboot_started'";

describe("reboots nova-compute's start-up cancelled (pure)", () => {
  it("a hard or soft reboot failed on a cleared task state is sent again, of its own type", () => {
    expect(preemptedVerdict(idle, reboot, [cleared(HARD)], NOW, GRANTED)).to.deep.equal({
      kind: "resend",
      requestId: "req-1",
      rebootType: "HARD",
      cause: "cancelled",
    });
    expect(preemptedVerdict(idle, reboot, [cleared(SOFT)], NOW, GRANTED)).to.deep.include({
      rebootType: "SOFT",
    });
  });

  it("nothing for a reboot that succeeded, failed for another reason, or is not the latest action", () => {
    const done = { ...cleared(HARD), result: "Success", details: null };
    expect(preemptedVerdict(idle, reboot, [done], NOW, GRANTED).kind).to.equal("none");
    const otherError = { ...cleared(HARD), details: "Timeout waiting for the node to power on" };
    expect(preemptedVerdict(idle, reboot, [otherError], NOW, GRANTED).kind).to.equal("none");
    // A conflict on another field (a delete under way, say) is no cleared reboot.
    const deleting = {
      ...cleared(HARD),
      details:
        "Conflict updating instance x. Expected: {'task_state': ['rebooting_hard']}. Actual: {'task_state': 'deleting'}",
    };
    expect(preemptedVerdict(idle, reboot, [deleting], NOW, GRANTED).kind).to.equal("none");
    const stop = { ...reboot, action: "stop" };
    expect(preemptedVerdict(idle, stop, [cleared(HARD)], NOW, GRANTED).kind).to.equal("none");
    expect(preemptedVerdict(idle, undefined, [], NOW, GRANTED).kind).to.equal("none");
  });

  it("nothing while the server has a task or is not active: nova-api would refuse it, or it would be a second one", () => {
    for (const server of [
      { ...idle, taskState: "rebooting_hard" },
      { ...idle, vmState: "stopped" },
      { ...idle, vmState: "error" },
    ])
      expect(
        preemptedVerdict(server, reboot, [cleared(HARD)], NOW, GRANTED).kind,
        JSON.stringify(server),
      ).to.equal("none");
  });

  it("nothing for a reboot cancelled longer ago than the age an operator would still want it done", () => {
    const finished = novaTimeMs(cleared(HARD).finishTime!);
    expect(
      preemptedVerdict(idle, reboot, [cleared(HARD)], finished + PREEMPTED_MAX_AGE_MS, GRANTED).kind,
    ).to.equal("resend");
    expect(
      preemptedVerdict(idle, reboot, [cleared(HARD)], finished + PREEMPTED_MAX_AGE_MS + 1, GRANTED).kind,
    ).to.equal("none");
  });

  it("pending while no compute answered, or one runs it; unknown when begun before the lease moved by a process that is gone", () => {
    expect(preemptedVerdict(idle, reboot, [], NOW, GRANTED)).to.deep.equal({
      kind: "pending",
      requestId: "req-1",
    });
    const begun: InstanceActionEvent = {
      event: REBOOT_EVENT,
      result: null,
      startTime: "2026-12-06T07:29:50.000000",
      finishTime: null,
      details: null,
    };
    const running = { ...idle, taskState: "reboot_started_hard" };
    expect(preemptedVerdict(running, reboot, [begun], NOW, GRANTED).kind).to.equal("pending");
    expect(preemptedVerdict(idle, reboot, [begun], NOW, GRANTED).kind).to.equal("unknown");
    // Begun within the clocks' skew of the grant: which host began it cannot be told.
    const atGrant = { ...begun, startTime: novaTime(GRANTED + CLOCK_SKEW_MS - 1) };
    expect(preemptedVerdict(idle, reboot, [atGrant], NOW, GRANTED).kind).to.equal("unknown");
  });

  it("a reboot begun after the lease moved is the new process's own while it may still fail; left unfinished longer, the old host's fenced process's: sent again", () => {
    const resumed: InstanceActionEvent = {
      event: REBOOT_EVENT,
      result: null,
      startTime: novaTime(GRANTED + CLOCK_SKEW_MS),
      finishTime: null,
      details: null,
    };
    const begun = novaTimeMs(resumed.startTime);
    const abandoned = begun + ABANDONED_AFTER_MS;
    expect(preemptedVerdict(idle, reboot, [resumed], abandoned, GRANTED)).to.deep.equal({
      kind: "resend",
      requestId: "req-1",
      rebootType: "HARD",
      cause: "fenced",
    });
    // The new nova-compute records a queued reboot, then fails it on the task state its
    // start-up cleared once neutron and Ironic answered: until then, its own.
    expect(preemptedVerdict(idle, reboot, [resumed], begun, GRANTED).kind).to.equal("pending");
    expect(preemptedVerdict(idle, reboot, [resumed], abandoned - 1, GRANTED).kind).to.equal("pending");
    // ... nor when a compute runs it now, or the server is no longer active, or it is older
    // than an operator would still want it done.
    const running = { ...idle, taskState: "reboot_started_hard" };
    expect(preemptedVerdict(running, reboot, [resumed], abandoned, GRANTED).kind).to.equal("pending");
    const stopped = { ...idle, vmState: "stopped" };
    expect(preemptedVerdict(stopped, reboot, [resumed], abandoned, GRANTED).kind).to.equal("unknown");
    expect(
      preemptedVerdict(idle, reboot, [resumed], begun + PREEMPTED_MAX_AGE_MS + 1, GRANTED).kind,
    ).to.equal("unknown");
  });

  it("a reboot no compute answered, its task cleared, is lost once this host's nova-compute has consumed its queue for a while: sent again, HARD", () => {
    const consuming = NOW - LOST_AFTER_MS;
    expect(preemptedVerdict(idle, reboot, [], NOW, GRANTED, consuming)).to.deep.equal({
      kind: "resend",
      requestId: "req-1",
      rebootType: "HARD",
      cause: "lost",
    });
    // Not yet: the new process not seen consuming, or not for long enough.
    expect(preemptedVerdict(idle, reboot, [], NOW, GRANTED, null).kind).to.equal("pending");
    expect(preemptedVerdict(idle, reboot, [], NOW, GRANTED, consuming + 1).kind).to.equal("pending");
    // The task state nova-api set is still there: queued for a compute, not lost.
    const queued = { ...idle, taskState: "rebooting_hard" };
    expect(preemptedVerdict(queued, reboot, [], NOW, GRANTED, consuming).kind).to.equal("pending");
    // Not active, or asked longer ago than an operator would still want it done.
    expect(
      preemptedVerdict({ ...idle, vmState: "stopped" }, reboot, [], NOW, GRANTED, consuming).kind,
    ).to.equal("pending");
    const old = { ...reboot, startTime: novaTime(NOW - PREEMPTED_MAX_AGE_MS - 1) };
    expect(preemptedVerdict(idle, old, [], NOW, GRANTED, consuming).kind).to.equal("pending");
  });

  it("a reboot carried out after the cancelled one was asked (two asked close together) leaves nothing to send", () => {
    const asked = { action: "reboot", requestId: "req-2", startTime: "2026-12-06T07:29:50.000000" };
    const earlier = { action: "reboot", requestId: "req-1", startTime: "2026-12-06T07:29:40.000000" };
    const ran = (finishTime: string, result = "Success"): InstanceActionEvent[] => [
      { event: REBOOT_EVENT, result, startTime: "2026-12-06T07:29:41.000000", finishTime, details: null },
    ];
    expect(
      rebootedSince(asked, earlier, ran("2026-12-06T07:29:52.000000")),
      "done after it was asked",
    ).to.equal(true);
    expect(rebootedSince(asked, earlier, ran("2026-12-06T07:29:45.000000")), "done before").to.equal(false);
    expect(rebootedSince(asked, earlier, ran("2026-12-06T07:29:52.000000", "Error")), "failed").to.equal(
      false,
    );
    expect(rebootedSince(asked, { ...earlier, action: "stop" }, ran("2026-12-06T07:29:52.000000"))).to.equal(
      false,
    );
    expect(rebootedSince(asked, undefined, [])).to.equal(false);
  });

  it("acts at the first look only on a cancelled reboot with no earlier reboot still finishing", () => {
    const cancelled = preemptedVerdict(idle, reboot, [cleared(HARD)], NOW, GRANTED);
    const earlier = { action: "reboot", requestId: "req-0", startTime: "2026-12-06T07:29:40.000000" };
    const running: InstanceActionEvent = {
      event: REBOOT_EVENT,
      result: null,
      startTime: "2026-12-06T07:29:41.000000",
      finishTime: null,
      details: null,
    };
    expect(settledVerdict(cancelled, undefined, []), "nothing before it").to.equal(true);
    expect(settledVerdict(cancelled, { ...earlier, action: "stop" }, []), "a stop before it").to.equal(true);
    expect(
      settledVerdict(cancelled, earlier, [
        { ...running, result: "Error", finishTime: "2026-12-06T07:29:45.000000" },
      ]),
      "an earlier reboot finished",
    ).to.equal(true);
    // Still finishing: its end clears the task state and it may be the reboot carried out
    // (rebootedSince reads it once its event has finished).
    expect(settledVerdict(cancelled, earlier, [running]), "an earlier reboot under way").to.equal(false);
    expect(settledVerdict(cancelled, earlier, []), "an earlier reboot no compute answered").to.equal(false);
    // Read from records a finishing reboot also shows for a moment: two looks.
    const fenced = preemptedVerdict(
      idle,
      reboot,
      [{ ...running, startTime: novaTime(GRANTED + CLOCK_SKEW_MS) }],
      GRANTED + CLOCK_SKEW_MS + ABANDONED_AFTER_MS,
      GRANTED,
    );
    expect(fenced).to.deep.include({ kind: "resend", cause: "fenced" });
    expect(settledVerdict(fenced, undefined, [])).to.equal(false);
    expect(settledVerdict({ kind: "pending", requestId: "req-1" }, undefined, [])).to.equal(false);
  });

  it("reads nova's times as UTC, with or without a zone", () => {
    expect(novaTimeMs("2026-12-06T07:29:55.000000")).to.equal(Date.parse("2026-12-06T07:29:55Z"));
    expect(novaTimeMs("2026-12-06T07:29:55+00:00")).to.equal(Date.parse("2026-12-06T07:29:55Z"));
    expect(Number.isNaN(novaTimeMs("soon"))).to.equal(true);
  });

  it("sends only what it can name: any other detail text or unreadable time is never a resend", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (details, finishTime) => {
        const verdict = preemptedVerdict(
          idle,
          reboot,
          [{ event: REBOOT_EVENT, result: "Error", startTime: finishTime, finishTime, details }],
          NOW,
          GRANTED,
        );
        if (verdict.kind !== "resend") return true;
        return /Actual: \{'task_state': None\}/.test(details) && Number.isFinite(novaTimeMs(finishTime));
      }),
      { numRuns: 5000 },
    );
  });
});
