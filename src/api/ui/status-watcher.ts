import { realClock, type Clock, type TimerHandle } from "../../runtime/clock.js";
import { logger } from "../../runtime/log.js";
import type { StatusSnapshot } from "./status-view.js";
import { encodePageModel } from "./model.js";
import { leaseLook, leaseTransitions, type LeaseLook, type LeaseTransition } from "./transitions.js";

/** One open page: where its server-sent events go. */
export interface Viewer {
  /** write text to the page; false when it is not taking it as fast (wait for drain) */
  write(text: string): boolean;
  once(event: "drain", listener: () => void): unknown;
}

export interface StatusWatcherOptions {
  /** between the end of one look and the start of the next, ms */
  periodMs?: number;
  /** how long looks go on after the last page closed, so a reload finds the history whole, ms */
  lingerMs?: number;
  /** transitions kept for a page that opens */
  historySize?: number;
  /** the clock its period and linger are counted on, and its timer set on (a test's virtual one) */
  clock?: Clock;
}

/** A server-sent event: `event`, its `json` on one line, and an id where given. */
const sseText = (event: string, json: string, id?: number) =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${json}\n\n`;
const sse = (event: string, data: unknown, id?: number) => sseText(event, JSON.stringify(data), id);

/**
 * What one page may cost per second in snapshots, bytes: a snapshot of 1,000 shards and
 * 1,000 agents is about 300 KiB, and every open page gets each one. Past this the looks
 * come less often than `periodMs` (a bridge's sockets and its one event loop serve the
 * lease renewals too); up to about 400 shards and agents they come every `periodMs`.
 */
export const SNAPSHOT_BYTES_PER_SECOND = 256 * 1024;

/**
 * The status page's one timer on this bridge, whatever the number of pages open: every
 * `periodMs` it reads the status (the same reads GET /v1/shards, /v1/agents and
 * /v1/ironic/delivery make) once, derives lease transitions by comparing it with the look
 * before, and pushes both to every open page as server-sent events, each encoded once.
 * It looks only while a page is open (and `lingerMs` after), one look at a time: a look
 * slower than the period delays the next, never overlaps it; a large fleet's looks come
 * less often (SNAPSHOT_BYTES_PER_SECOND), and its snapshot is encoded a few hundred rows
 * per turn of the event loop.
 *
 * A page that does not read fast enough is skipped, not buffered for: it gets the latest
 * snapshot and the whole history once it drains.
 */
export class StatusWatcher {
  private readonly viewers = new Set<Viewer>();
  private readonly behind = new Set<Viewer>();
  private readonly history: LeaseTransition[] = [];
  private seq = 0;
  private previous: LeaseLook | null = null;
  /** the last snapshot event, encoded, for a page that opens */
  private latest: string | null = null;
  private timer: TimerHandle | null = null;
  private looking = false;
  private lastViewerLeftMs: number | null = null;
  private closed = false;
  private readonly periodMs: number;
  private readonly lingerMs: number;
  private readonly historySize: number;
  private readonly clock: Clock;

  constructor(
    /** one look at the bridge: tokens included (they tell a new lease from a renewed one) */
    private readonly look: () => Promise<StatusSnapshot>,
    private readonly ttlMsOf: (shard: string) => number,
    { periodMs = 500, lingerMs = 60_000, historySize = 50, clock = realClock }: StatusWatcherOptions = {},
  ) {
    this.periodMs = periodMs;
    this.lingerMs = lingerMs;
    this.historySize = historySize;
    this.clock = clock;
  }

  get viewerCount(): number {
    return this.viewers.size;
  }

  /** Start pushing to `viewer`: the history and the latest snapshot at once, then each look. */
  add(viewer: Viewer): void {
    this.viewers.add(viewer);
    this.lastViewerLeftMs = null;
    this.catchUp(viewer);
    if (this.timer === null && !this.looking && !this.closed) void this.tick();
  }

  remove(viewer: Viewer): void {
    this.viewers.delete(viewer);
    this.behind.delete(viewer);
    if (this.viewers.size === 0) this.lastViewerLeftMs = this.clock.now();
  }

  /** Stop looking, for good (the bridge shuts down); the routes end the pages' streams. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) this.clock.clear(this.timer);
    this.timer = null;
  }

  private catchUp(viewer: Viewer): void {
    const ok =
      viewer.write(sse("history", this.history)) && (this.latest === null || viewer.write(this.latest));
    if (!ok) this.waitFor(viewer);
  }

  private waitFor(viewer: Viewer): void {
    if (this.behind.has(viewer)) return;
    this.behind.add(viewer);
    viewer.once("drain", () => {
      if (!this.behind.delete(viewer) || !this.viewers.has(viewer)) return;
      this.catchUp(viewer);
    });
  }

  private broadcast(text: string): void {
    for (const viewer of this.viewers) {
      if (this.behind.has(viewer)) continue;
      if (!viewer.write(text)) this.waitFor(viewer);
    }
  }

  private async tick(): Promise<void> {
    this.timer = null;
    this.looking = true;
    try {
      const snapshot = await this.look();
      const atMs = Date.parse(snapshot.at);
      const look = leaseLook(snapshot.shards, atMs);
      const found = leaseTransitions(this.previous, look, atMs);
      this.previous = look;
      let text = "";
      for (const transition of found) {
        const numbered = { seq: ++this.seq, ...transition };
        this.history.push(numbered);
        text += sse("transition", numbered, numbered.seq);
      }
      this.history.splice(0, Math.max(0, this.history.length - this.historySize));
      this.latest = sseText("snapshot", await encodePageModel(snapshot, this.ttlMsOf));
      this.broadcast(text + this.latest);
    } catch (error) {
      // The store is down or slow: say so on every page and keep the last picture; the
      // next look tries again.
      logger.warn("status page: look failed", { error: String(error) });
      this.broadcast(sse("trouble", { at: new Date().toISOString(), detail: String(error) }));
    } finally {
      this.looking = false;
    }
    const lingering =
      this.viewers.size === 0 &&
      (this.lastViewerLeftMs === null || this.clock.now() - this.lastViewerLeftMs >= this.lingerMs);
    if (lingering) this.latest = null; // a page opened after a pause waits for a fresh look
    if (this.closed || lingering) return;
    const sizeDelayMs = ((this.latest?.length ?? 0) / SNAPSHOT_BYTES_PER_SECOND) * 1000;
    // The pages' sockets keep a server alive; this timer alone does not keep a process (see Clock).
    this.timer = this.clock.set(() => void this.tick(), Math.max(this.periodMs, sizeDelayMs));
  }
}
