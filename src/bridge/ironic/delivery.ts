import { setTimeout as sleep } from "node:timers/promises";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { LEASE_TTL_DEFAULT_MS } from "../../core/lease/bounds.js";
import { LeaseKeeper, type LeaseClient } from "../../core/keeper/lease-keeper.js";
import { logger } from "../../runtime/log.js";
import {
  queuedAtMs,
  type IronicQueue,
  type PendingChange,
  type QueueLayout,
  type QueueStats,
  type Settlement,
} from "../../store/ports/ironic-queue.js";
import { IronicClient, IronicError } from "../../upstream/ironic-client.js";
import {
  DEFAULT_RETRY_POLICY,
  callsAllowed,
  fairShare,
  judgeFailure,
  nextWindow,
  type RetryPolicy,
} from "./delivery-policy.js";
import { KeystoneError, type IronicAuth } from "../../upstream/keystone.js";
import { applyDelta } from "./sink.js";

export interface IronicDeliveryOptions {
  /** the Ironic API, and how to authenticate to it (noauth without) */
  endpoint: string;
  auth?: IronicAuth;
  /**
   * A partition owner's lease TTL (default: the shard leases' default TTL). It renews at a
   * third of it and stops delivering at two thirds; an Ironic call times out at a quarter
   * of it (see mayCall); a bridge not heard from for two thirds of it no longer counts.
   */
  ownerTtlMs?: number;
  /**
   * Ironic calls in flight at once from this bridge, over all its partitions, at most
   * (default 8); fewer while calls go unanswered (nextWindow)
   */
  concurrency?: number;
  /** how often owned partitions are read for new changes (default 100 ms) */
  pollMs?: number;
  /** entries read ahead of delivery, per partition (default 1000) */
  readAhead?: number;
  /**
   * how long a standby waits between attempts at a partition's lease, and the most between
   * two balancing rounds (default 500 ms)
   */
  standbyPollMs?: number;
  /**
   * this bridge's name among the workers (default host:pid:random): the holder of its
   * partition leases, taken back at once by a process of the same name (workerIdentity)
   */
  worker?: string;
  /**
   * How long a node's next change waits after a change whose earlier copy may still be
   * inside Ironic (default 5 s; see NodeWork.unsure): above Ironic's own budget for a
   * request that waits on a node's lock (3 attempts, 1 s apart, by default).
   */
  quietMs?: number;
  retry?: Partial<RetryPolicy>;
}

/** A dead bridge's part of the queue moves as fast as a shard does: the same default TTL. */
export const DEFAULT_OWNER_TTL_MS = LEASE_TTL_DEFAULT_MS;

/** This bridge's own part of the work (the queue's figures are store-wide). */
export interface WorkerStats {
  worker: string;
  /** the partitions this bridge owns now */
  partitions: number[];
  /** changes (one commit's for one node, or a folded record) this bridge took off the queue, since start */
  delivered: number;
  retried: number;
  given_up: number;
  /** Ironic calls in flight */
  calls_in_flight: number;
  /** the calls it lets be in flight now: the concurrency, or fewer after calls went unanswered */
  calls_allowed: number;
}

export interface DeliveryStats {
  durable: boolean;
  queue: QueueStats;
  layout: QueueLayout;
  worker: WorkerStats;
}

/** One node's changes waiting in an owned partition, oldest first, and where delivery stands. */
interface NodeWork {
  changes: PendingChange[];
  /** changes of the head already in Ironic (a retry goes on from there) */
  progress: number;
  /** failed attempts at the head */
  attempts: number;
  /** not before this (monotonic ms): the backoff after a failure */
  notBefore: number;
  /** the head was judged undeliverable; settling it is what is left */
  givenUp: string | null;
  /**
   * A copy of the head may be inside Ironic still, to run after ours: a call of ours that
   * timed out or lost its connection, or — for the first change read by a new owner — a
   * call of the previous owner (a client abandons a request, Ironic does not). Once the
   * head has landed, the node's next change waits `quietMs`, so such a copy cannot land
   * after it (e.g. re-add a trait the next change removes).
   */
  unsure: boolean;
  busy: boolean;
}

/** An owned partition: what was read of it and what is being delivered. */
class PartitionRun {
  stopped = false;
  /** the last entry read (null: read from the start) */
  after: string | null = null;
  /** where the scan of folded records goes on */
  mergedCursor = "0";
  /** entries read and not yet settled */
  buffered = 0;
  reading = false;
  /**
   * The stream's end not reached yet: the changes read so far include any the previous
   * owner had in flight (it read in the same order, as far as its read-ahead)
   */
  fresh = true;
  readonly nodes = new Map<string, NodeWork>();
  /** nodes whose folded record is among their changes (read once until settled) */
  readonly mergedHeld = new Set<string>();
  readonly drains = new Set<Promise<void>>();

  constructor(
    readonly partition: number,
    readonly keeper: LeaseKeeper,
  ) {}

  /** Resolves when no delivery of this run is in flight any more. */
  async settled(): Promise<void> {
    while (this.drains.size > 0) await Promise.all([...this.drains]);
  }
}

/**
 * Delivers the queue of trait changes (src/store/ports/ironic-queue.ts) to Ironic. The queue is cut into
 * partitions by node; each partition has one owner at a time among the bridges on the
 * store, by a lease with the shards' rules (LeaseKeeper over the store's partition
 * leases: a fencing token, self-fencing at two thirds of the TTL, a new owner only after
 * the TTL by the store's clock). The owner reads its partitions from their start (all
 * that is there is undelivered), delivers each node's changes in order (nodes in
 * parallel), and takes each off the queue once Ironic has it: at least once, in order
 * per node. A bridge that dies leaves its partitions to expire; a live one takes them
 * and starts over from what is still queued. Bridges share the partitions evenly (a
 * heartbeat counts them); one over its share hands partitions over, after its calls in
 * flight have ended.
 */
export class IronicQueueDelivery {
  readonly durable: boolean;
  /** told how long each delivered change waited since it was queued, ms (the lag histogram) */
  onDelivered: (waitedMs: number) => void = () => undefined;
  readonly worker: string;
  private readonly ironic: IronicClient;
  private readonly ttlMs: number;
  private readonly callTimeoutMs: number;
  private readonly concurrency: number;
  private readonly pollMs: number;
  private readonly readAhead: number;
  private readonly standbyPollMs: number;
  private readonly retry: RetryPolicy;
  private readonly quietMs: number;
  private layout: QueueLayout | undefined;
  private readonly keepers = new Map<number, LeaseKeeper>();
  private readonly runs = new Map<number, PartitionRun>();
  /** partitions this process has owned at some time */
  private readonly ownedBefore = new Set<number>();
  /** partitions handed over in the last balancing round: not competed for until the next */
  private resting = new Set<number>();
  private inFlight = 0;
  /** how many calls may be in flight (nextWindow): the concurrency until a call goes unanswered */
  private window: number;
  private readonly counts = { delivered: 0, retried: 0, given_up: 0 };
  private timers: { poll?: NodeJS.Timeout; balance?: NodeJS.Timeout } = {};
  private stopping = false;
  private nudged = false;
  /** a rotating start, so no partition is always served last */
  private turn = 0;

  constructor(
    private readonly queue: IronicQueue,
    private readonly owners: LeaseClient,
    options: IronicDeliveryOptions,
  ) {
    this.durable = queue.durable;
    this.ttlMs = options.ownerTtlMs ?? DEFAULT_OWNER_TTL_MS;
    this.callTimeoutMs = Math.floor(this.ttlMs / 4);
    // One attempt per call: the retries are ours, and each one checks the lease first.
    this.ironic = new IronicClient(options.endpoint, options.auth, {
      timeoutMs: this.callTimeoutMs,
      attempts: 1,
    });
    this.concurrency = options.concurrency ?? 8;
    this.window = this.concurrency;
    this.pollMs = options.pollMs ?? 100;
    this.readAhead = options.readAhead ?? 1000;
    this.standbyPollMs = options.standbyPollMs ?? 500;
    this.retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.quietMs = options.quietMs ?? 5000;
    this.worker = options.worker ?? `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  }

  start(): this {
    void this.balance();
    void this.poll();
    return this;
  }

  /** Look for new changes now (a commit on this bridge just queued some). */
  nudge(): void {
    if (this.nudged || this.stopping) return;
    this.nudged = true;
    setImmediate(() => {
      this.nudged = false;
      void this.readAll();
    });
  }

  /**
   * Stop delivering: no new call, the calls in flight ended, every partition handed back
   * (a standby on another bridge takes it at once), and this worker off the count.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timers.poll);
    clearTimeout(this.timers.balance);
    await Promise.all([...this.keepers.keys()].map((p) => this.handOver(p)));
    await this.queue.heartbeat(this.worker, this.ttlMs, true).catch(() => undefined);
  }

  async stats(): Promise<DeliveryStats> {
    const layout = await this.queueLayout();
    const queue = await this.queue.stats(10, this.ttlMs);
    const partitions = [...this.runs.values()].filter((r) => !r.stopped).map((r) => r.partition);
    return {
      durable: this.durable,
      queue,
      layout,
      worker: {
        worker: this.worker,
        partitions: partitions.sort((a, b) => a - b),
        ...this.counts,
        calls_in_flight: this.inFlight,
        calls_allowed: callsAllowed(this.window),
      },
    };
  }

  private async queueLayout(): Promise<QueueLayout> {
    this.layout ??= await this.queue.layout();
    return this.layout;
  }

  // ---- ownership --------------------------------------------------------------------

  /**
   * Every round (TTL/3, or the standby poll when shorter): say this worker is alive, count
   * the live ones, and own an even share of the partitions: compete for more while under
   * it, hand over what is above it. A worker silent for two thirds of a TTL no longer
   * counts: a bridge killed -9 renewed its partitions at most a third of a TTL before it
   * died, so its leases outlive its last heartbeat by two thirds of a TTL at least; the
   * others compete for them (standing by, polling) before they expire, and one owns each
   * within a poll of the expiry.
   */
  private async balance(): Promise<void> {
    if (this.stopping) return;
    try {
      const { partitions } = await this.queueLayout();
      const live = await this.queue.heartbeat(this.worker, Math.floor((2 * this.ttlMs) / 3));
      if (this.stopping) return;
      const share = fairShare(partitions, live);
      const held = [...this.keepers].filter(([, k]) => k.status === "active").map(([p]) => p);
      const resting = this.resting;
      this.resting = new Set();
      if (held.length > share) {
        // The highest-numbered first: bridges agree on no order, but each is steady.
        for (const p of held.sort((a, b) => b - a).slice(0, held.length - share)) {
          this.resting.add(p);
          void this.handOver(p);
        }
      }
      for (let p = 0; p < partitions; p++) {
        const keeper = this.keepers.get(p);
        if (keeper === undefined && held.length < share && !resting.has(p) && !this.resting.has(p))
          this.compete(p);
        else if (keeper !== undefined && keeper.status !== "active" && held.length >= share) {
          // Enough held: stop standing by for partitions others own.
          this.keepers.delete(p);
          void keeper.stop();
        }
      }
    } catch (error) {
      logger.warn("ironic-delivery-balance-failed", { error: String(error) });
    } finally {
      const roundMs = Math.min(this.ttlMs / 3, this.standbyPollMs);
      if (!this.stopping) this.timers.balance = setTimeout(() => void this.balance(), roundMs);
    }
  }

  private compete(partition: number): void {
    if (this.stopping) return;
    const keeper = new LeaseKeeper({
      client: this.owners,
      shard: `partition-${partition}`,
      agent: this.worker,
      ttlMs: this.ttlMs,
      standbyPollMs: this.standbyPollMs,
    });
    keeper.on("active", ({ token }) => void this.begin(partition, keeper, token));
    keeper.on("lost", ({ reason, detail }) => {
      logger.warn("ironic-partition-lost", { partition, reason, detail });
      this.end(partition, keeper);
    });
    this.keepers.set(partition, keeper);
    keeper.start();
  }

  /** Owned: read the partition from its start, after any earlier run of it has ended. */
  private async begin(partition: number, keeper: LeaseKeeper, token: number): Promise<void> {
    await this.runs.get(partition)?.settled();
    if (this.stopping || keeper.token() === null || this.keepers.get(partition) !== keeper) return;
    logger.info("ironic-partition-owned", { partition, token, worker: this.worker });
    const run = new PartitionRun(partition, keeper);
    // A partition that only this process ever delivered (the embedded store's, first
    // owned) had no earlier owner to leave calls in Ironic.
    run.fresh = this.queue.durable || this.ownedBefore.has(partition);
    this.ownedBefore.add(partition);
    this.runs.set(partition, run);
    this.nudge();
  }

  /** No longer owned: no new call; what was read is dropped (the next owner reads it again). */
  private end(partition: number, keeper: LeaseKeeper): void {
    const run = this.runs.get(partition);
    if (run === undefined || run.keeper !== keeper) return;
    run.stopped = true;
    void run.settled().then(() => {
      if (this.runs.get(partition) === run) this.runs.delete(partition);
    });
  }

  /** Stop delivering a partition, wait for its calls in flight, then release its lease. */
  private async handOver(partition: number): Promise<void> {
    const keeper = this.keepers.get(partition);
    if (keeper === undefined) return;
    this.keepers.delete(partition);
    const run = this.runs.get(partition);
    if (run !== undefined && run.keeper === keeper) {
      run.stopped = true;
      await run.settled();
      this.runs.delete(partition);
    }
    await keeper.stop();
    if (!this.stopping) logger.info("ironic-partition-handed-over", { partition, worker: this.worker });
  }

  // ---- reading ----------------------------------------------------------------------

  private async poll(): Promise<void> {
    if (this.stopping) return;
    await this.readAll();
    if (!this.stopping) this.timers.poll = setTimeout(() => void this.poll(), this.pollMs);
  }

  private async readAll(): Promise<void> {
    await Promise.all([...this.runs.values()].map((run) => this.read(run)));
    this.pump();
  }

  /** Read what is new in an owned partition, up to the read-ahead. */
  private async read(run: PartitionRun): Promise<void> {
    if (run.stopped || run.reading || run.buffered >= this.readAhead) return;
    run.reading = true;
    try {
      const limit = this.readAhead - run.buffered;
      const read = await this.queue.read(run.partition, run.after, limit, run.mergedCursor);
      if (run.stopped) return;
      for (const entry of read.entries) this.workOf(run, entry.node).changes.push(entry);
      run.buffered += read.entries.length;
      run.after = read.entries.at(-1)?.id ?? run.after;
      if (read.mergedCursor !== "") run.mergedCursor = read.mergedCursor;
      // A folded record goes after the node's queued changes: the read holds them all.
      for (const record of read.merged) {
        if (run.mergedHeld.has(record.node)) continue;
        run.mergedHeld.add(record.node);
        this.workOf(run, record.node).changes.push(record);
      }
      // Up to the stream's end once: past everything the previous owner can have had in flight.
      if (read.entries.length < limit) run.fresh = false;
    } catch (error) {
      logger.warn("ironic-queue-read-failed", { partition: run.partition, error: String(error) });
    } finally {
      run.reading = false;
    }
  }

  private workOf(run: PartitionRun, node: string): NodeWork {
    let work = run.nodes.get(node);
    if (work === undefined) {
      work = {
        changes: [],
        progress: 0,
        attempts: 0,
        notBefore: 0,
        givenUp: null,
        unsure: run.fresh,
        busy: false,
      };
      run.nodes.set(node, work);
    }
    return work;
  }

  // ---- delivering -------------------------------------------------------------------

  /** Start delivering nodes that have changes and are due, while calls are free. */
  private pump(): void {
    const runs = [...this.runs.values()].filter((run) => !run.stopped);
    if (runs.length === 0) return;
    const now = performance.now();
    this.turn = (this.turn + 1) % runs.length;
    for (let i = 0; i < runs.length && this.inFlight < callsAllowed(this.window); i++) {
      const run = runs[(this.turn + i) % runs.length]!;
      for (const [node, work] of run.nodes) {
        if (this.inFlight >= callsAllowed(this.window)) return;
        if (work.busy || work.notBefore > now) continue;
        if (work.changes.length === 0)
          run.nodes.delete(node); // its quiet time is over
        else this.drain(run, node, work);
      }
    }
  }

  /**
   * Deliver one node's changes in order until it has none, must wait, the run stops, or
   * the window has narrowed below the calls in flight (pump takes the node up again).
   */
  private drain(run: PartitionRun, node: string, work: NodeWork): void {
    work.busy = true;
    this.inFlight++;
    const drained = (async () => {
      try {
        while (
          !run.stopped &&
          work.changes.length > 0 &&
          this.inFlight <= callsAllowed(this.window) &&
          (await this.deliverHead(run, node, work))
        );
      } finally {
        work.busy = false;
        this.inFlight--;
        const idle = work.changes.length === 0 && work.notBefore <= performance.now();
        if (idle && run.nodes.get(node) === work) run.nodes.delete(node);
        if (!this.stopping) this.pump();
      }
    })();
    run.drains.add(drained);
    void drained.finally(() => run.drains.delete(drained));
  }

  /**
   * Deliver the node's oldest change and take it off the queue. Answers whether to go on
   * with its next one (false: it waits for a retry, or the run stopped).
   */
  private async deliverHead(run: PartitionRun, node: string, work: NodeWork): Promise<boolean> {
    const change = work.changes[0]!;
    if (work.givenUp === null) {
      for (; work.progress < change.deltas.length; work.progress++) {
        if (!(await this.mayCall(run))) return false;
        try {
          await applyDelta(this.ironic, node, change.deltas[work.progress]!);
          this.window = nextWindow(this.window, this.concurrency, true);
        } catch (error) {
          work.attempts++;
          // No answer (a timeout, a lost connection): Ironic may run the request later.
          // Keystone refusing a token or failing: nothing was sent that Ironic could run.
          if (error instanceof IronicError) this.window = nextWindow(this.window, this.concurrency, true);
          else if (!(error instanceof KeystoneError)) {
            work.unsure = true;
            this.window = nextWindow(this.window, this.concurrency, false);
          }
          const verdict = judgeFailure(error, work.attempts, this.retry);
          if (verdict.kind === "give_up") {
            work.givenUp = verdict.reason;
            break;
          }
          this.counts.retried++;
          void this.queue.countRetries(1).catch(() => undefined);
          logger.warn("ironic-traits-retry", {
            node,
            change: change.deltas,
            attempt: work.attempts,
            retry_in_ms: verdict.afterMs,
            error: verdict.why,
            calls_allowed: callsAllowed(this.window),
          });
          work.notBefore = performance.now() + verdict.afterMs;
          return false;
        }
      }
    }
    const outcome: Settlement =
      work.givenUp === null ? { kind: "delivered" } : { kind: "given_up", reason: work.givenUp };
    let settled: { settled: boolean; nowMs: number };
    try {
      settled = await this.queue.settle(run.partition, change, outcome);
    } catch (error) {
      // The store is away: Ironic has the change (or it is given up); settle it later.
      logger.warn("ironic-queue-settle-failed", { node, error: String(error) });
      work.notBefore = performance.now() + this.retry.backoffMs;
      return false;
    }
    if (outcome.kind === "given_up") {
      this.counts.given_up++;
      logger.error("ironic-traits-given-up", { node, change: change.deltas, reason: outcome.reason });
    } else {
      this.counts.delivered++;
      logger.info("ironic-traits", { node, change: change.deltas, partition: run.partition });
      if (settled.settled) this.onDelivered(Math.max(0, settled.nowMs - queuedAtMs(change)));
    }
    work.changes.shift();
    if (change.kind === "queued") run.buffered--;
    else run.mergedHeld.delete(node); // read again if more was folded into it meanwhile
    const quiet = work.unsure;
    Object.assign(work, { progress: 0, attempts: 0, notBefore: 0, givenUp: null, unsure: false });
    if (!quiet) return true;
    work.notBefore = performance.now() + this.quietMs;
    return false;
  }

  /**
   * Whether a call to Ironic may start: only while this bridge owns the partition with at
   * least a call's timeout left before it would stop on its own. So every call ends (or
   * is abandoned) before this owner's deadline, which is a third of a TTL before anyone
   * else can own the partition: no call of an old owner is still in flight from its side
   * when a new owner starts. (A request Ironic has received and not yet run is beyond
   * any client: see docs/ARCHITECTURE.md.) Waits while a renew is due.
   */
  private async mayCall(run: PartitionRun): Promise<boolean> {
    for (;;) {
      if (run.stopped) return false;
      const left = run.keeper.msLeft();
      if (left === null) return false;
      if (left >= this.callTimeoutMs) return true;
      await sleep(Math.min(50, this.callTimeoutMs));
    }
  }
}
