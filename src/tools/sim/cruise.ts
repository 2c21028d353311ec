import {
  advanceKeeper,
  type KeeperAction,
  type KeeperConfig,
  type KeeperEvent,
} from "../../core/keeper/machine.js";
import type { SimNetwork } from "./network.js";
import { EventQueue } from "./queue.js";
import type { SimStore } from "./shard-store.js";
import type { Keeper, SimClocks } from "./shards-mode.js";

const STEP: KeeperEvent = { kind: "step" };

/**
 * A cruised renew would have done something other than a clean renew (a refusal, a lost
 * lease, a timeout, a draw from the random sequence): its moment has passed, so the run
 * cannot be kept. `simulate` runs the scenario again with every renew a queue event.
 */
export class CruiseBroken extends Error {
  constructor(what: string, atUs: number) {
    super(`a cruised renew at ${atUs} µs would have ${what}`);
    this.name = "CruiseBroken";
  }
}

/**
 * Healthy holders' renews outside the queue. Most of a day's events are healthy holders
 * renewing (21.6 of 32 million in the day of test/bench/sim.bench.ts), and a queue event
 * per renew cost more than the renew's rules. After a renew that succeeded at once, the
 * holder's next renews are not queued: each runs (`renew`: the keeper machine and the
 * lease machine, on the same clock readings a queued one gets) at its own moment, when
 * something is about to look at the holder or its shard: any store operation on the
 * shard, any event of the keeper, its fenced writes, a barrier, the end of the run. The
 * queue puts a renew among simultaneous events by the keeper's number, not by when it was
 * scheduled (EventQueue.atRenew), so "every renew that comes before the event running now"
 * is exact. A cruise ends — the next renew is queued again — when an operation changes
 * the shard's state, when the keeper gets an event, and at the barrier ahead of every
 * fault of the timeline (2 × latency + 1 µs before it, so the renews whose round trip a
 * fault falls into run as events). While cruising nothing else can reach the holder, so
 * each of its renews is a clean one; a cruised renew that would do anything else — a
 * refusal, a timeout, a lost lease, a random draw — throws `CruiseBroken` before it does,
 * and `simulate` runs the scenario again without cruising (`cruise: false`, which the
 * tests hold the cruising run to, report for report). Each cruised renew counts as an
 * event, as the queued one would.
 */
export class Cruise {
  /** a cruised renew is running: nothing it does may reach the queue or the random sequence */
  inCruise = false;
  /** the keeper whose renew was just answered with success, at once (the only way into a cruise) */
  renewedAtOnce: Keeper | null = null;
  /** per shard, its holder while that one cruises */
  readonly cruiserOf: Array<Keeper | null>;
  readonly cruising = new Set<Keeper>();
  /** renews run outside the queue so far */
  renews = 0;
  /** Where a cruised renew's actions go: one send (the renew), the step timer, the renew's report. */
  private readonly sink = {
    keeper: null as Keeper | null,
    send: null as Extract<KeeperAction, { kind: "send" }> | null,
    stepAt: NaN,
    clocks: null as SimClocks | null,
    act(action: KeeperAction): void {
      if (action.kind === "send") this.send = action;
      else if (action.kind === "timer") {
        if (action.timer === "step") {
          this.keeper!.stepEpoch++;
          this.stepAt = action.atMono ?? NaN;
        }
      } else if (action.report.kind !== "renewed")
        throw new CruiseBroken(`reported ${action.report.kind}`, this.clocks!.mono);
    },
  };

  constructor(
    private readonly queue: EventQueue,
    private readonly config: KeeperConfig,
    /** the clocks the keeper machine reads, shared with the driver */
    private readonly clocks: SimClocks,
    private readonly store: SimStore,
    private readonly network: SimNetwork,
    shardCount: number,
    /** false: every renew is a queue event */
    private readonly enabled: boolean,
  ) {
    this.cruiserOf = Array.from({ length: shardCount }, () => null);
    this.sink.clocks = clocks;
  }

  /**
   * The barrier ahead of each fault: from there on the renews whose round trip the fault
   * may fall into are queue events (see SimNetwork.request), so a cruise must end before it.
   */
  private barrierOf(faultUs: number): number {
    return faultUs - 2 * this.network.latencyUs - 1;
  }

  /** Before each fault at `faultTimesUs`: every cruise ends (the barrier is the driver's event, not the model's). */
  placeBarriers(faultTimesUs: readonly number[]): void {
    const queue = this.queue;
    for (const faultUs of new Set(faultTimesUs))
      queue.atFirst(this.barrierOf(faultUs), () => {
        queue.uncount();
        for (const k of [...this.cruising]) {
          this.catchUp(k);
          this.end(k);
        }
      });
  }

  /**
   * May `k`, whose renew was just answered with success at once, cruise to its next renew
   * at `nextUs`? Only a host running, not frozen, not cut off, on a store that is up, with
   * no message the slow way on the wire, and no fault's barrier before that renew (a fault
   * at now has run: faults come first): what the timeline can change, it changes at a
   * fault, and a barrier ends every cruise first.
   */
  mayCruise(k: Keeper, nextUs: number): boolean {
    const host = k.host;
    const now = this.queue.now;
    return (
      this.enabled &&
      host.up &&
      !host.paused &&
      !host.cutTo &&
      !host.cutFrom &&
      this.store.downUntilUs <= now &&
      this.network.slowUntilUs <= now &&
      this.cruiserOf[k.shard] === null &&
      nextUs < this.barrierOf(this.network.firstFaultAfter(now))
    );
  }

  /** `k` cruises: its next renew, at `atUs`, runs outside the queue. */
  begin(k: Keeper, atUs: number): void {
    k.cruiseAtUs = atUs;
    this.cruiserOf[k.shard] = k;
    this.cruising.add(k);
  }

  /** Run `k`'s cruised renews that come before the event running now, each at its own moment. */
  catchUp(k: Keeper, untilUs = this.queue.now, untilRank = this.queue.nowRank): void {
    const rank = EventQueue.renewRank(k.uid);
    let atUs = k.cruiseAtUs;
    if (!(atUs < untilUs || (atUs === untilUs && rank < untilRank))) return;
    this.inCruise = true;
    do {
      this.renew(k, atUs);
      this.renews++;
      this.queue.ranOutside(1);
      atUs = k.cruiseAtUs;
    } while (atUs < untilUs || (atUs === untilUs && rank < untilRank));
    this.inCruise = false;
  }

  /**
   * `k`'s step timer firing at `atUs` while it cruises: what the queued event does (the
   * driver's `onStep`, `dispatch`, `perform`, SimNetwork.request, the renew's answer),
   * without the parts a cruise makes constant: the host is running, unfrozen and not cut
   * off, the store is up, no fault falls near (the fast path of the request), the timer is
   * live. The same keeper machine and lease machine, on the same clock readings.
   */
  private renew(k: Keeper, atUs: number): void {
    const { config, clocks, sink } = this;
    const host = k.host;
    const latencyUs = this.network.latencyUs;
    sink.keeper = k;
    sink.send = null;
    sink.stepAt = NaN;
    const local = host.local(atUs);
    clocks.mono = local;
    clocks.wall = local;
    k.machine = advanceKeeper(config, k.machine, STEP, clocks, sink, true);
    const send = sink.send as Extract<KeeperAction, { kind: "send" }> | null;
    if (send === null || send.op !== "renew" || sink.stepAt === sink.stepAt)
      throw new CruiseBroken(`sent ${send?.op ?? "nothing"}`, atUs);
    k.renewAttempt = send.attempt;
    k.renewSent = send.sent;
    if (2 * latencyUs * host.rateNow > send.timeout) throw new CruiseBroken("timed out", atUs);
    const outcome = this.store.op(k.shard, k.renewOp!, atUs + latencyUs, true);
    if (!outcome.ok) throw new CruiseBroken("been refused", atUs);
    const answeredLocal = host.local(atUs + 2 * latencyUs);
    clocks.mono = answeredLocal;
    clocks.wall = answeredLocal;
    const event = { kind: "renewed", attempt: k.renewAttempt, sent: k.renewSent, outcome } as const;
    sink.send = null;
    k.machine = advanceKeeper(config, k.machine, event, clocks, sink, true);
    if (sink.send !== null || sink.stepAt !== sink.stepAt || k.machine.phase !== "active")
      throw new CruiseBroken("armed no next renew", atUs);
    k.cruiseAtUs = Math.max(host.trueAt(sink.stepAt), atUs);
  }

  /** Queue `k`'s next renew again. */
  end(k: Keeper): void {
    const atUs = k.cruiseAtUs;
    if (atUs !== atUs) return;
    k.cruiseAtUs = NaN;
    this.cruiserOf[k.shard] = null;
    this.cruising.delete(k);
    this.queue.atRenew(atUs, k.uid, k.onStep, k.stepEpoch);
  }

  /** Run the cruised renews due by the end of the run (the queue runs its events up to and at the end). */
  finish(endUs: number): void {
    for (const k of this.cruising) this.catchUp(k, endUs, Infinity);
  }
}
