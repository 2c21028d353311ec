import type { LeaseOutcome } from "../../core/lease/machine.js";
import {
  idle,
  noWaits,
  stepWaits,
  type ShardWaits,
  type WaitAction,
  type WaitEvent,
} from "../../core/lease/waits.js";
import type { SimHost } from "./host.js";
import type { SimNetwork } from "./network.js";
import type { EventQueue } from "./queue.js";
import type { SimStore } from "./shard-store.js";

const MS = 1000;

/** Who waits: one agent's keeper of one shard (the simulator's driver's, or a shipped LeaseKeeper's). */
export interface WaitingKeeper {
  readonly host: SimHost;
  readonly shard: number;
}

/** The bridge's answer to a waiting acquire reaching its agent, and how long it waited (ms). */
export type HearWaited = (outcome: LeaseOutcome, waitedMs: number) => void;

/** A standby's acquire waiting at the bridge. */
interface SimWaiter<K extends WaitingKeeper> {
  k: K;
  hear: HearWaited;
  /** the incarnation of its host that sent it: a later one hears no answer to it */
  hostEpoch: number;
  arrivedUs: number;
  triedUs: number;
}

/** One shard's waits, and the epoch of its timer: an older timer's event is dropped. */
interface ShardEntry<K extends WaitingKeeper> {
  state: ShardWaits<SimWaiter<K>>;
  timerEpoch: number;
}

/**
 * Waiting acquires (fleet.standby_wait_ms): the bridge's side of them, by the rules the
 * bridge runs (lease/waits.ts), on the simulator's clock. The bridge sits with the store
 * here: its tries are store operations stamped with the moment they happen (a release's
 * wake: the release's own stamp), and its answers take one latency back to the agent. Only
 * on the fast path (see SimNetwork.request): with a fault near, the link cut or the store
 * down, the acquire goes as a plain one and is answered at once, as a bridge that cannot
 * wait answers, and the agent polls.
 */
export class StandbyWaits<K extends WaitingKeeper> {
  private readonly waits = new Map<number, ShardEntry<K>>();

  constructor(
    private readonly queue: EventQueue,
    private readonly store: SimStore,
    private readonly network: SimNetwork,
    private readonly ttlMs: number,
    /** the lease of `shard` was handed back at `atUs`: wake whoever waits for it */
    private readonly wakeWaiters: (shard: number, atUs: number) => void,
  ) {}

  private acquireOf(k: K) {
    return { kind: "acquire", agent: k.host.id, ttlMs: this.ttlMs } as const;
  }

  /** The bridge's answer to `w`, sent at `atUs`: it reaches the agent a latency later, unless the link is cut. */
  private answer(w: SimWaiter<K>, outcome: LeaseOutcome, atUs: number): void {
    const { k } = w;
    const waitedMs = Math.floor(((outcome.ok ? w.triedUs : atUs) - w.arrivedUs) / MS);
    k.host.later(atUs + this.network.latencyUs, () => {
      if (k.host.epoch !== w.hostEpoch || k.host.cutFrom) return; // lost: the agent times out
      w.hear(outcome, waitedMs);
    });
  }

  /** The lease of `shard` was handed back at `atUs`: the first waiter tries. */
  wake(shard: number, atUs: number): void {
    if (this.waits.has(shard)) this.step(shard, { kind: "wake" }, atUs);
  }

  private step(shard: number, event: WaitEvent<SimWaiter<K>>, atUs: number): void {
    let entry = this.waits.get(shard);
    if (entry === undefined) {
      if (event.kind !== "park") return;
      this.waits.set(shard, (entry = { state: noWaits(), timerEpoch: 0 }));
    }
    const step = stepWaits(entry.state, event, atUs, MS);
    entry.state = step.state;
    let trying: SimWaiter<K> | null = null;
    for (const action of step.actions) {
      if (action.kind === "try") trying = action.waiter;
      else this.perform(shard, entry, action, atUs);
    }
    if (trying !== null) {
      trying.triedUs = atUs;
      if (this.store.downUntilUs > atUs) this.step(shard, { kind: "failed" }, atUs);
      else
        this.step(
          shard,
          { kind: "tried", outcome: this.store.op(shard, this.acquireOf(trying.k), atUs) },
          atUs,
        );
    }
    if (idle(entry.state) && this.waits.get(shard) === entry) this.waits.delete(shard);
  }

  private perform(
    shard: number,
    entry: ShardEntry<K>,
    action: Exclude<WaitAction<SimWaiter<K>>, { kind: "try" }>,
    atUs: number,
  ): void {
    const queue = this.queue;
    if (action.kind === "answer") return this.answer(action.waiter, action.outcome, atUs);
    if (action.kind === "give-back") {
      const released = this.store.op(
        shard,
        { kind: "release", agent: action.waiter.k.host.id, token: action.token },
        atUs,
      );
      if (released.ok) queue.at(atUs, () => this.wakeWaiters(shard, queue.now));
      return;
    }
    const epoch = ++entry.timerEpoch;
    if (action.at !== null)
      queue.at(Math.max(action.at, queue.now), () => {
        if (this.waits.get(shard) === entry && entry.timerEpoch === epoch)
          this.step(shard, { kind: "wake" }, queue.now);
      });
  }

  /**
   * A waiting acquire of `k` sent at `atUs`, waiting up to `waitMs`, when the fast path
   * takes it; `hear` gets the answer. False: send it as a plain one.
   */
  acquire(k: K, waitMs: number, atUs: number, hear: HearWaited): boolean {
    const { queue, store } = this;
    const host = k.host;
    const arrivedUs = atUs + this.network.latencyUs;
    if (host.cutTo || !this.network.fastPath(atUs) || store.downUntilUs > arrivedUs) return false;
    const waiter: SimWaiter<K> = {
      k,
      hear,
      hostEpoch: host.epoch,
      arrivedUs,
      triedUs: arrivedUs,
    };
    const first = store.op(k.shard, this.acquireOf(k), arrivedUs);
    if (first.ok || (first.reason !== "held" && first.reason !== "recovering")) {
      this.answer(waiter, first, arrivedUs);
      return true;
    }
    this.step(k.shard, { kind: "park", waiter, refusal: first }, arrivedUs);
    // The end of its wait: a plain acquire's answer, if it still waits.
    queue.at(arrivedUs + waitMs * MS, () => {
      if (!(this.waits.get(k.shard)?.state.queue.includes(waiter) ?? false)) return;
      this.step(k.shard, { kind: "leave", waiter }, queue.now);
      if (store.downUntilUs > queue.now) return; // no answer: the agent times out
      waiter.triedUs = queue.now;
      this.answer(waiter, store.op(k.shard, this.acquireOf(k), queue.now), queue.now);
    });
    return true;
  }

  /** `k`'s host is gone: its waiting acquire leaves (a real client's connection closes). */
  leave(k: K): void {
    const entry = this.waits.get(k.shard);
    if (entry === undefined) return;
    for (const waiter of entry.state.queue)
      if (waiter.k === k) this.step(k.shard, { kind: "leave", waiter }, this.queue.now);
  }
}
