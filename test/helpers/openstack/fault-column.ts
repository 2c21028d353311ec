import { setTimeout as sleep } from "node:timers/promises";
import type { BootingCloud } from "./cloud.js";
import { Instances, type ActionEvent, type ServerView } from "./instances.js";
import type { IronicEvents } from "./ironic-events.js";
import { RecordWatch, type ChangeCounts, type RecordChange } from "./record-watch.js";

/** Between two looks at whether the reboot is done. */
const LOOK_MS = 1000;

/**
 * One way of serving a cloud's nodes, and the fault every way gets: kill -9 of the
 * nova-compute that serves an instance, then the killed host back.
 */
export interface FaultSubject {
  /** kill -9 of the process that serves the instance; resolves once it is sent */
  kill(): Promise<void>;
  /** the killed host back, as systemd's Restart= would bring it */
  restore(): Promise<void>;
  /** until the fleet is settled again after the return at `since` (ms of the epoch): when, or null if not within `withinMs` */
  untilSettled(since: number, withinMs: number): Promise<number | null>;
}

export interface FaultWindows {
  /** from the kill, how long to watch and retry before the host comes back */
  windowMs: number;
  /** a hard reboot sent again every this long while none has completed since the kill */
  retryEveryMs: number;
  /** after the return, how long the fleet may take to settle and the reboot to complete */
  settleWithinMs: number;
  /** after both (or their bound), how long more to watch for late changes and power actions */
  quietMs: number;
}

/** A reboot sent: when (ms after the fault it follows) and nova-api's answer. */
export interface RebootSent {
  afterMs: number;
  status: number;
}

/** What one way of serving did through the fault, from every participant's records. */
export interface FaultColumn {
  windows: FaultWindows;
  /** when the kill was sent, and the host started again (ms of the epoch) */
  killedAt: number;
  returnedAt: number;
  /** the hard reboots sent in the window: the first right after the kill, then the retries */
  sent: RebootSent[];
  /** from the kill to the first look that saw a reboot done (Ironic cycled the node, the server ACTIVE with no task); null: not in the window */
  doneAfterMs: number | null;
  /** Ironic's power actions on the instance's node in the window (their targets) */
  powerInWindow: string[];
  /** the server at the window's end */
  serverAtWindowEnd: ServerView;
  /** nova's record of the last reboot at the window's end */
  actionAtWindowEnd: ActionEvent[] | null;
  /** what nova's and placement's records did in the window */
  inWindow: ChangeCounts;
  windowChanges: RecordChange[];
  /** from the return to settled; null: not within settleWithinMs */
  settledAfterMs: number | null;
  /** when no reboot ran in the window: those sent after the return (every retryEveryMs from it) until one ran */
  sentAfterReturn: RebootSent[];
  /** from the return to the reboot done, when it was not in the window (null: not after either) */
  doneAfterReturnMs: number | null;
  /** Ironic's power actions on the node from the return to the end */
  powerAfterReturn: string[];
  afterReturn: ChangeCounts;
  returnChanges: RecordChange[];
  serverAtEnd: ServerView;
  actionAtEnd: ActionEvent[] | null;
  /** nova's records of every reboot sent, at the end: how many a nova-compute ran to success, failed, never started */
  reboots: { success: number; error: number; neverRan: number };
}

/**
 * The measurement both columns share: kill -9 (`subject.kill`), a hard reboot of `server`
 * (on `node`) sent right after, then every `retryEveryMs` again while none has completed,
 * until `windowMs` after the kill; the host back (`subject.restore`), until settled, then
 * `quietMs` more. Done: Ironic's notification of a reboot of the node since the kill, and
 * the server ACTIVE with no task. Records from `watch` (running through the whole of it).
 */
export async function measureFault(
  cloud: BootingCloud,
  events: IronicEvents,
  watch: RecordWatch,
  target: { server: string; node: string },
  subject: FaultSubject,
  windows: FaultWindows,
): Promise<FaultColumn> {
  const instances = new Instances(cloud);
  const reboot = () => instances.act(target.server, { reboot: { type: "HARD" } });
  const power = (from: number, to: number) =>
    events
      .powerActions(target.node, from)
      .filter((e) => e.at < to)
      .map((e) => e.toPower ?? e.type);
  const isDone = async (since: number) =>
    events.powerActions(target.node, since).some((e) => e.toPower === "rebooting") &&
    (await instances.server(target.server)).taskState === null;

  await watch.caughtUp();
  const killedAt = Date.now();
  await subject.kill();
  const sent: RebootSent[] = [];
  const send = async () => {
    const afterMs = Date.now() - killedAt;
    sent.push({ afterMs, status: (await reboot()).status });
  };
  await send();
  let doneAfterMs: number | null = null;
  const windowEnd = killedAt + windows.windowMs;
  while (Date.now() < windowEnd) {
    await sleep(Math.min(LOOK_MS, Math.max(0, windowEnd - Date.now())));
    if (doneAfterMs !== null) continue;
    if (await isDone(killedAt)) doneAfterMs = Date.now() - killedAt;
    else if (Date.now() - killedAt - sent.at(-1)!.afterMs >= windows.retryEveryMs && Date.now() < windowEnd)
      await send();
  }
  await watch.caughtUp();
  const windowClosedAt = Date.now();
  const serverAtWindowEnd = await instances.server(target.server);
  const actionAtWindowEnd = await instances.lastAction(target.server, "reboot");

  const returnedAt = Date.now();
  await subject.restore();
  // The reboot after the return, when none ran in the window: watched beside the settling,
  // so its time is its own, and sent again every retryEveryMs while none has run (what
  // nova did with those sent before is in the records: a reboot done counts from here).
  let doneAfterReturnMs: number | null = null;
  const sentAfterReturn: RebootSent[] = [];
  const settleEnd = returnedAt + windows.settleWithinMs;
  const rebootWatch = (async () => {
    let lastSent = returnedAt;
    while (doneAfterMs === null && doneAfterReturnMs === null && Date.now() < settleEnd) {
      if (await isDone(returnedAt)) doneAfterReturnMs = Date.now() - returnedAt;
      else if (Date.now() - lastSent >= windows.retryEveryMs) {
        lastSent = Date.now();
        sentAfterReturn.push({ afterMs: lastSent - returnedAt, status: (await reboot()).status });
      } else await sleep(LOOK_MS);
    }
  })();
  const settledAt = await subject.untilSettled(returnedAt, windows.settleWithinMs);
  await rebootWatch;
  await sleep(windows.quietMs);
  await watch.caughtUp();
  const endedAt = Date.now();
  // nova's instance action of each reboot sent (the server had none before the kill), and
  // what became of it: its compute_reboot_instance event's result, or none (never ran).
  const rebootActions = (await instances.actions(target.server))
    .filter((a) => a.action === "reboot")
    .slice(-(sent.length + sentAfterReturn.length));
  const reboots = { success: 0, error: 0, neverRan: 0 };
  for (const a of rebootActions) {
    const ran = (await instances.events(target.server, a.requestId)).find(
      (e) => e.event === "compute_reboot_instance",
    );
    if (ran?.result === "Success") reboots.success++;
    else if (ran?.result === "Error") reboots.error++;
    else reboots.neverRan++;
  }
  const windowChanges = watch.between(killedAt, windowClosedAt);
  const returnChanges = watch.between(windowClosedAt, endedAt);
  return {
    windows,
    killedAt,
    returnedAt,
    sent,
    doneAfterMs,
    powerInWindow: power(killedAt, windowClosedAt),
    serverAtWindowEnd,
    actionAtWindowEnd,
    inWindow: RecordWatch.count(windowChanges),
    windowChanges,
    settledAfterMs: settledAt === null ? null : settledAt - returnedAt,
    doneAfterReturnMs,
    sentAfterReturn,
    powerAfterReturn: power(windowClosedAt, endedAt),
    afterReturn: RecordWatch.count(returnChanges),
    returnChanges,
    serverAtEnd: await instances.server(target.server),
    actionAtEnd: await instances.lastAction(target.server, "reboot"),
    reboots,
  };
}

/** `ms` as seconds, one decimal. */
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** How many of each answer: "202 x3". */
function answers(sent: readonly RebootSent[]): string {
  const by = new Map<number, number>();
  for (const s of sent) by.set(s.status, (by.get(s.status) ?? 0) + 1);
  return [...by].map(([status, n]) => (n === 1 ? `${status}` : `${status} x${n}`)).join(", ");
}

/** Power actions, each target with its count, in order of first appearance ("rebooting x2"), or "none". */
function powerList(actions: readonly string[]): string {
  if (actions.length === 0) return "none";
  const by = new Map<string, number>();
  for (const a of actions) by.set(a, (by.get(a) ?? 0) + 1);
  return [...by].map(([a, n]) => (n === 1 ? a : `${a} x${n}`)).join(", ");
}

/** The rows of a side-by-side table of columns measured by `measureFault`: a label, then one cell per column. */
export function faultRows(columns: readonly FaultColumn[]): string[][] {
  const row = (label: string, cell: (c: FaultColumn) => string) => [label, ...columns.map(cell)];
  const w = columns[0]!.windows;
  return [
    row("a hard reboot of an instance of the killed host, sent right after: nova-api's answer", (c) =>
      c.sent[0] === undefined ? "-" : `${c.sent[0].status} (after ${c.sent[0].afterMs} ms)`,
    ),
    row(`a reboot done (Ironic cycled its node, no task left), from the kill`, (c) =>
      c.doneAfterMs === null ? `not within ${seconds(w.windowMs)}` : `${c.doneAfterMs} ms`,
    ),
    row(
      `reboots sent in the window (one more every ${seconds(w.retryEveryMs)} while none done): answers`,
      (c) => `${c.sent.length}: ${answers(c.sent)}`,
    ),
    row("Ironic's power actions on its node in the window", (c) => powerList(c.powerInWindow)),
    row(
      "the server at the window's end (status, task)",
      (c) => `${c.serverAtWindowEnd.status}, ${c.serverAtWindowEnd.taskState ?? "no task"}`,
    ),
    row("compute node records moved / duplicated / deleted / made again", (c) =>
      [c.inWindow.moved, c.inWindow.duplicated, c.inWindow.deleted, c.inWindow.created].join(" / "),
    ),
    row(
      "resource providers changed / recreated",
      (c) => `${c.inWindow["provider-changed"]} / ${c.inWindow["provider-recreated"]}`,
    ),
    row("instance records moved (host or node)", (c) => String(c.inWindow["instance-moved"])),
    row("after the host returns: settled after", (c) =>
      c.settledAfterMs === null ? `not within ${seconds(w.settleWithinMs)}` : `${c.settledAfterMs} ms`,
    ),
    row("after the return: a reboot done, from the return", (c) =>
      c.doneAfterMs !== null
        ? "(done in the window)"
        : c.doneAfterReturnMs === null
          ? `not within ${seconds(w.settleWithinMs)}`
          : `${c.doneAfterReturnMs} ms`,
    ),
    row(
      `after the return: reboots sent (every ${seconds(w.retryEveryMs)} from it while none done): answers`,
      (c) =>
        c.doneAfterMs !== null ? "-" : `${c.sentAfterReturn.length}: ${answers(c.sentAfterReturn) || "none"}`,
    ),
    row("after the return: Ironic's power actions on its node", (c) => powerList(c.powerAfterReturn)),
    row("after the return: records moved / duplicated / deleted / made again", (c) =>
      [c.afterReturn.moved, c.afterReturn.duplicated, c.afterReturn.deleted, c.afterReturn.created].join(
        " / ",
      ),
    ),
    row(
      "after the return: providers changed / recreated",
      (c) => `${c.afterReturn["provider-changed"]} / ${c.afterReturn["provider-recreated"]}`,
    ),
    row("after the return: instance records moved", (c) => String(c.afterReturn["instance-moved"])),
    row("nova's records of every reboot sent, at the end: succeeded / failed / never ran", (c) =>
      [c.reboots.success, c.reboots.error, c.reboots.neverRan].join(" / "),
    ),
    row(
      "the server at the end (status, task; nova's last reboot events)",
      (c) =>
        `${c.serverAtEnd.status}, ${c.serverAtEnd.taskState ?? "no task"}; ${
          c.actionAtEnd?.map((e) => `${e.event} ${e.result ?? "(running)"}`).join(", ") ?? "none"
        }`,
    ),
  ];
}

/** The changes of a column, one line each, for a test's or a bench's output. */
export function describeChanges(changes: readonly RecordChange[], since: number): string[] {
  return changes.map((c) => `+${c.at - since} ms ${c.kind} ${c.subject}: ${c.from} -> ${c.to}`);
}
