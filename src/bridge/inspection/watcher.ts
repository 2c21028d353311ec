import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { z } from "zod";
import { IronicError, type InspectionMark, type IronicClient } from "../../upstream/ironic-client.js";
import type { InspectorClient } from "../../upstream/inspector-client.js";
import { logger } from "../../runtime/log.js";
import type { DeliveryAnswer } from "./webhook-client.js";

/** Where inspection data is read from once Ironic says an inspection finished. */
export interface InspectionDataSource {
  readonly name: string;
  /** `{inventory, pci_devices}` for the webhook, or null when the source holds no data for the node. */
  fetch(node: string): Promise<{ inventory: unknown; pci_devices: unknown[] } | null>;
}

const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

/**
 * Ironic's own copy (`GET /v1/nodes/{n}/inventory`, API 1.81); PCI devices come from plugin data.
 * Ironic 21.4 (2023.1) with the `inspector` inspect interface stores one inventory row per
 * inspection and then answers 500 "Multiple rows were found" for a node inspected twice;
 * read from the inspector (`--inspector`) there.
 */
export function ironicInventorySource(ironic: IronicClient): InspectionDataSource {
  return {
    name: "ironic",
    async fetch(node) {
      const data = await ironic.inventory(node).catch((error: unknown) => {
        if (error instanceof IronicError && /multiple rows/i.test(error.message)) {
          throw new Error(
            `${error.message} (Ironic keeps several inventories for this node and cannot read them; ` +
              "read inspection data from ironic-inspector with --inspector URL)",
          );
        }
        throw error;
      });
      if (data === null) return null;
      const plugin = (data.plugin_data ?? {}) as { pci_devices?: unknown };
      return { inventory: data.inventory, pci_devices: listOf(plugin.pci_devices) };
    },
  };
}

/** A standalone inspector's stored data (`GET /v1/introspection/{n}/data`): inventory plus flat plugin fields. */
export function inspectorDataSource(inspector: InspectorClient): InspectionDataSource {
  return {
    name: "inspector",
    async fetch(node) {
      const data = await inspector.introspectionData(node);
      if (data === null) return null;
      return { inventory: data.inventory, pci_devices: listOf(data.pci_devices) };
    },
  };
}

/** What one poll did, by outcome. */
export interface PollSummary {
  /** nodes read with a finished inspection: since the window's start (every one on a first poll) */
  inspected: number;
  /** of those, finished since the watcher last looked */
  due: number;
  /** the bridge applied the result and a trait changed */
  applied: number;
  /** the bridge applied the result, and the node's traits were what it says already */
  unchanged: number;
  /** the bridge had applied this or a newer result already (409, or a replayed delivery) */
  already: number;
  /** the bridge does not know the node yet: tried again next poll */
  unknownNode: number;
  /** the bridge refused the result (bad data, ownership): not retried until the node is inspected again */
  refused: number;
  /** the source holds no data for a finished inspection */
  noData: number;
  /** the source or the bridge failed: tried again next poll */
  failed: number;
}

/**
 * The inspections to deliver now: every node whose last finished inspection is not the
 * one the watcher last handled, oldest first so deliveries follow finish order. Pure.
 */
export function dueInspections(
  marks: InspectionMark[],
  handled: ReadonlyMap<string, string>,
): InspectionMark[] {
  return marks
    .filter((mark) => handled.get(mark.uuid) !== mark.finishedAt)
    .sort((a, b) => Date.parse(a.finishedAt) - Date.parse(b.finishedAt) || (a.uuid < b.uuid ? -1 : 1));
}

/**
 * How far back each poll reads before the newest inspection it has seen: an inspection
 * stamped by a conductor whose clock is behind, or committed a little after a newer one,
 * still falls inside the window.
 */
export const LOOKBACK_MS = 120_000;

/**
 * Where the next poll starts reading (ms since the epoch; null: from the beginning).
 * `marks` were read from `previous` on; `retry` are those to try again next poll (the
 * bridge or the source failed, or the bridge does not know the node yet), which hold the
 * window open. The window never moves back, and moves on to `lookbackMs` before the
 * newest inspection seen. Pure.
 */
export function nextReadFrom(
  marks: readonly InspectionMark[],
  retry: readonly InspectionMark[],
  previous: number | null,
  lookbackMs = LOOKBACK_MS,
): number | null {
  if (marks.length === 0) return previous;
  const times = (list: readonly InspectionMark[]) => list.map((m) => Date.parse(m.finishedAt));
  const onward = Math.max(previous ?? -Infinity, Math.max(...times(marks)) - lookbackMs);
  return Math.min(onward, ...times(retry));
}

/** A delivery id that is the same for every attempt at one node's one inspection, so the bridge applies it once. */
export const deliveryIdOf = (mark: InspectionMark): string =>
  `ironic-inspection.${mark.uuid}.${Date.parse(mark.finishedAt)}`;

/** Version 1 had no window (every poll read every node); it is read as a first poll's. */
const StateFile = z.union([
  z.strictObject({ version: z.literal(1), handled: z.record(z.string(), z.string()) }),
  z.strictObject({
    version: z.literal(2),
    handled: z.record(z.string(), z.string()),
    read_from: z.number().nullable(),
  }),
]);

export interface InspectionWatcherOptions {
  ironic: Pick<IronicClient, "inspectionsSince">;
  source: InspectionDataSource;
  deliver: (payload: unknown, deliveryId: string) => Promise<DeliveryAnswer>;
  /** where the watcher remembers what it handled across restarts; in memory only when absent */
  stateFile?: string;
  /** data fetches and deliveries in flight at once */
  concurrency?: number;
  /** how far before the newest inspection seen each poll reads (default LOOKBACK_MS) */
  lookbackMs?: number;
}

/**
 * Turns inspections an unmodified inspector finished into webhook deliveries. It polls
 * Ironic for the nodes whose `inspection_finished_at` falls in its window (from
 * `LOOKBACK_MS` before the newest it has seen, held open by what must be tried again),
 * fetches the data of inspections it has not handled, and posts them to the bridge's
 * webhook: the same signature, ordering and ownership checks as any inspector delivery.
 * The fallback where Ironic sends no notifications (`serve --ironic-notifications`).
 *
 * Safe to restart and to run twice: a delivery's id names the node and its inspection,
 * so the bridge applies each inspection once, and refuses one older than it has applied.
 * Without a state file a restarted watcher's first poll reads every node's last
 * inspection once.
 */
export class InspectionWatcher {
  private readonly handled = new Map<string, string>();
  /** where the next poll reads from (null: every node) */
  private readFrom: number | null = null;
  /** (node, inspection) pairs already reported as unknown to the bridge, so each is logged once */
  private readonly reportedUnknown = new Set<string>();
  private readonly concurrency: number;

  constructor(private readonly options: InspectionWatcherOptions) {
    this.concurrency = options.concurrency ?? 4;
    if (options.stateFile !== undefined && existsSync(options.stateFile)) {
      const state = StateFile.safeParse(JSON.parse(readFileSync(options.stateFile, "utf8")));
      if (!state.success) throw new Error(`${options.stateFile}: not a watcher state file`);
      for (const [uuid, finishedAt] of Object.entries(state.data.handled)) this.handled.set(uuid, finishedAt);
      if (state.data.version === 2) this.readFrom = state.data.read_from;
    }
  }

  async poll(): Promise<PollSummary> {
    const marks = await this.options.ironic.inspectionsSince(this.readFrom);
    const due = dueInspections(marks, this.handled);
    const summary: PollSummary = {
      inspected: marks.length,
      due: due.length,
      applied: 0,
      unchanged: 0,
      already: 0,
      unknownNode: 0,
      refused: 0,
      noData: 0,
      failed: 0,
    };
    const retry: InspectionMark[] = [];
    let next = 0;
    const worker = async () => {
      while (next < due.length) {
        const mark = due[next++]!;
        const outcome = await this.handle(mark);
        summary[outcome]++;
        if (outcome === "failed" || outcome === "unknownNode") retry.push(mark);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, due.length) }, worker));
    this.readFrom = nextReadFrom(marks, retry, this.readFrom, this.options.lookbackMs);
    // What lies before the window is never read again (a node inspected anew is read with
    // its new time): forget it, so the state stays the window's size.
    if (this.readFrom !== null)
      for (const [uuid, finishedAt] of this.handled)
        if (Date.parse(finishedAt) < this.readFrom) this.handled.delete(uuid);
    this.save();
    return summary;
  }

  /** Poll every `intervalMs` until `signal` aborts; a failed poll is logged and the next one tries again. */
  async run(intervalMs: number, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const summary = await this.poll();
        if (summary.due > 0) logger.info("inspection-watch", { ...summary });
      } catch (error) {
        logger.error("inspection-watch-poll-failed", { error: String(error) });
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
    }
  }

  private async handle(mark: InspectionMark): Promise<Exclude<keyof PollSummary, "inspected" | "due">> {
    const context = { node: mark.uuid, finished_at: mark.finishedAt, source: this.options.source.name };
    try {
      const data = await this.options.source.fetch(mark.uuid);
      if (data === null) {
        logger.warn("inspection-without-data", context);
        this.handled.set(mark.uuid, mark.finishedAt);
        return "noData";
      }
      const payload = { kind: "inspection", node: mark.uuid, finished_at: mark.finishedAt, data };
      const answer = await this.options.deliver(payload, deliveryIdOf(mark));
      const outcome = classify(answer);
      if (outcome === "unknownNode") {
        const key = deliveryIdOf(mark);
        if (!this.reportedUnknown.has(key)) {
          this.reportedUnknown.add(key);
          logger.warn("inspection-for-unknown-node", {
            ...context,
            hint: "load it: shardbridge ironic-sync",
          });
        }
        return outcome;
      }
      if (outcome === "failed") {
        logger.warn("inspection-delivery-failed", { ...context, status: answer.status, answer: answer.body });
        return outcome;
      }
      if (outcome === "refused") logger.error("inspection-refused", { ...context, answer: answer.body });
      else logger.info("inspection-delivered", { ...context, outcome, answer: answer.body });
      this.handled.set(mark.uuid, mark.finishedAt);
      return outcome;
    } catch (error) {
      logger.warn("inspection-delivery-failed", { ...context, error: String(error) });
      return "failed";
    }
  }

  private save(): void {
    const file = this.options.stateFile;
    if (file === undefined) return;
    const state = { version: 2, handled: Object.fromEntries(this.handled), read_from: this.readFrom };
    // Write then rename: a watcher killed mid-write leaves the previous state whole.
    writeFileSync(`${file}.tmp`, JSON.stringify(state));
    renameSync(`${file}.tmp`, file);
  }
}

/**
 * What a webhook answer means for the watcher. A 200 lists the trait changes it applied
 * (`applied`): none means the node's traits were the inspection's already.
 */
function classify(
  answer: DeliveryAnswer,
): "applied" | "unchanged" | "already" | "unknownNode" | "refused" | "failed" {
  if (answer.status === 200) {
    if (answer.replay) return "already";
    const applied = (answer.body as { applied?: unknown } | null)?.applied;
    return Array.isArray(applied) && applied.length === 0 ? "unchanged" : "applied";
  }
  if (answer.status === 409) return "already";
  if (answer.status === 404) return "unknownNode";
  // 400/422: the data or the rules' outcome is refused; the same data will be refused again.
  if (answer.status === 400 || answer.status === 413 || answer.status === 422) return "refused";
  // 401/403 (secret or token wrong), 429, 5xx, 503: worth another try once fixed.
  return "failed";
}
