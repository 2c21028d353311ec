import type { SentAt } from "../../core/keeper/machine.js";
import { CruiseBroken, type Cruise } from "./cruise.js";
import type { SimHost } from "./host.js";
import type { EventQueue } from "./queue.js";
import type { SimStore } from "./shard-store.js";

/**
 * What a request does at the store and with its answer (see `SimNetwork.request`): made
 * once per keeper or lease; what differs per request (the machine's attempt and send
 * time) comes as arguments.
 */
export interface RequestCalls<T> {
  apply: (atUs: number) => T;
  settle: (answer: T) => "now" | "on-arrival";
  onAnswer: (answer: T, attempt: number, sent: SentAt, nowUs: number, lagUs: number) => void;
  onTimeout: (attempt: number) => void;
}

/**
 * The links between the agents and the store: every message takes the same latency, a
 * cut link (either way) loses it, a store that is down loses it.
 *
 * Messages to the store are applied at their sending moment, stamped with their arrival
 * time, unless a fault falls inside the round trip or a message sent the slow way is still
 * on its way: then they travel as events, so arrival order stays send order.
 */
export class SimNetwork {
  /** until when a message sent the slow way may still be on its way (µs) */
  slowUntilUs = -1;
  /**
   * The healthy holders' renews outside the queue; set once both exist (each uses the
   * other). None where every renew is an event (the shipped keepers, shipped-keepers.ts).
   */
  cruise: Cruise | null = null;

  constructor(
    private readonly queue: EventQueue,
    private readonly store: SimStore,
    readonly latencyUs: number,
    /** when the timeline's faults happen, sorted */
    private readonly faultTimesUs: readonly number[],
  ) {}

  /** The time of the first fault after `afterUs`, or Infinity. */
  firstFaultAfter(afterUs: number): number {
    const times = this.faultTimesUs;
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (times[mid]! <= afterUs) lo = mid + 1;
      else hi = mid;
    }
    return lo < times.length ? times[lo]! : Infinity;
  }

  /** May a round trip leaving at `sentUs` be applied at once (no fault in it, nothing on the slow path ahead)? */
  fastPath(sentUs: number): boolean {
    return sentUs >= this.slowUntilUs && this.firstFaultAfter(sentUs) > sentUs + 2 * this.latencyUs;
  }

  /** A one-way message to the store (a write, a release): applied on arrival, lost on a cut link or a down store. */
  toStore(host: SimHost, apply: (atUs: number) => void): void {
    if (host.cutTo) return;
    const { queue, store } = this;
    const atUs = queue.now + this.latencyUs;
    if (this.fastPath(queue.now)) {
      if (store.downUntilUs <= atUs) apply(atUs);
      return;
    }
    if (this.cruise !== null && this.cruise.cruising.size > 0)
      throw new CruiseBroken("seen a message on the slow path", queue.now);
    this.slowUntilUs = Math.max(this.slowUntilUs, atUs);
    queue.at(atUs, () => {
      if (store.downUntilUs <= queue.now) apply(queue.now);
    });
  }

  /**
   * A request from `host` to the store: it leaves now, is applied on arrival, and its
   * answer comes back; a cut link or a store that is down loses it, and the caller hears
   * nothing until its timeout. An answer that comes after the timeout counts as the timeout.
   *
   * Every message takes the same latency, so requests arrive in the order they were sent:
   * applying one at its sending moment, stamped with its arrival time, keeps the store's
   * order exact. Only a fault inside the round trip (a cut, a freeze, a crash, Redis going
   * down) needs the two legs as separate events. `settle` picks which answers are handled
   * at once (their handling does not depend on the moment) and which at the answer's time.
   */
  request<T>(
    host: SimHost,
    /** when it leaves: now, or a cruised renew's moment */
    sentUs: number,
    calls: RequestCalls<T>,
    attempt: number,
    sent: SentAt,
    /** on the caller's clock; Infinity: the caller times the request out itself */
    timeoutLocalUs: number,
  ): void {
    const { queue, store, latencyUs } = this;
    const sentLocal = host.local(sentUs);
    if (host.cutTo) return this.timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
    if (this.fastPath(sentUs)) {
      if (store.downUntilUs > sentUs + latencyUs)
        return this.timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
      const answer = calls.apply(sentUs + latencyUs);
      if (host.cutFrom || 2 * latencyUs * host.rateNow > timeoutLocalUs)
        return this.timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
      if (calls.settle(answer) === "now") calls.onAnswer(answer, attempt, sent, sentUs, 2 * latencyUs);
      else host.later(sentUs + 2 * latencyUs, () => calls.onAnswer(answer, attempt, sent, queue.now, 0));
      return;
    }
    // No message travels the slow way during a cruise: only a fault starts one, and a barrier ends every cruise first.
    if (this.cruise !== null && this.cruise.cruising.size > 0)
      throw new CruiseBroken("met a message on the slow path", sentUs);
    this.slowUntilUs = Math.max(this.slowUntilUs, sentUs + latencyUs);
    queue.at(sentUs + latencyUs, () => {
      if (store.downUntilUs > queue.now)
        return this.timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
      const answer = calls.apply(queue.now);
      queue.at(queue.now + latencyUs, () => {
        if (host.cutFrom) return this.timeout(host, calls, attempt, sentLocal + timeoutLocalUs);
        host.later(queue.now, () => {
          if (host.local() - sentLocal > timeoutLocalUs) calls.onTimeout(attempt);
          else calls.onAnswer(answer, attempt, sent, queue.now, 0);
        });
      });
    });
  }

  /**
   * A request's timeout, heard when the caller's clock reads `atLocal`; none at Infinity:
   * a caller that keeps its own timeout (a LeaseKeeper's, on its scheduler) just hears
   * nothing.
   */
  private timeout<T>(host: SimHost, calls: RequestCalls<T>, attempt: number, atLocal: number): void {
    if (atLocal === Infinity) return;
    host.later(host.trueAt(atLocal), () => calls.onTimeout(attempt));
  }
}
