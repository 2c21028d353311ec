import { realClock, type Clock, type TimerHandle } from "../../runtime/clock.js";
import type { AcquireRequest } from "../../core/lease/bounds.js";
import { StoreUnavailableError } from "../../core/store-errors.js";
import type { LeaseOutcome } from "../../core/lease/machine.js";
import {
  idle,
  noWaits,
  stepWaits,
  type Refusal,
  type ShardWaits,
  type WaitAction,
} from "../../core/lease/waits.js";
import { logger } from "../../runtime/log.js";
import type { AcquireInput } from "../../store/ports/leases.js";
import type { Admit, Store } from "../../store/store.js";

/**
 * A wait this long or longer that nothing answered ends at a random moment in its last
 * fifth, not at its end: standbys that began waiting together (every standby of a fleet
 * after a bridge restart) would otherwise ask again together every wait, 10,000 requests
 * in one burst at a million nodes, which held every renew behind them for a second.
 */
export const WAIT_SPREAD_FROM_MS = 5_000;
const WAIT_SPREAD = 0.2;

/**
 * What a waiting acquire answers: the outcome, and `waitedMs` — how long after the request
 * arrived its granting acquire was tried (rounded down). The store began the lease no
 * earlier, so the agent may count its lease from its send time plus that (see
 * keeper-machine.ts).
 */
export type WaitedOutcome = LeaseOutcome & { waitedMs: number };

/** One parked request: what to acquire for it, and how to answer it. */
interface Waiter {
  readonly request: AcquireRequest;
  /** when it arrived, and when the acquire that answers it was tried (this bridge's clock) */
  readonly arrivedAt: number;
  triedAt: number;
  readonly admit: Admit<AcquireInput> | undefined;
  /** whether the shard may still be leased, asked again before each acquire made for it (throws: its answer) */
  readonly leasable: () => Promise<void>;
  /** the refusal it was parked with: what it hears when the bridge closes */
  readonly refusal: Refusal;
  readonly resolve: (outcome: WaitedOutcome) => void;
  readonly reject: (error: unknown) => void;
  endTimer: TimerHandle | undefined;
}

interface Shard {
  state: ShardWaits<Waiter>;
  timer: TimerHandle | undefined;
  /** when the armed timer fires (the wake due, state.wakeAt, may be later: a renew moved it) */
  firesAt: number;
}

/**
 * Acquires that wait (POST /v1/shards/{shard}/lease with `wait_ms`): the rules of
 * `lease/waits.ts` driven with real timers and this bridge's Store. Woken by the Store's
 * releases (this bridge's, and other bridges' as the store announces them) and by a timer
 * at the end of the lease a waiter was refused behind; a waiter whose client goes away
 * leaves, and one whose wait ends gets one plain acquire's answer (so an announcement lost
 * in a reconnect costs at most the wait; a long wait ends somewhat early, see
 * WAIT_SPREAD_FROM_MS). Work per wake: one acquire and a few answers, so
 * the event loop is held for no longer than a renew holds it.
 */
export class LeaseWaits {
  private readonly shards = new Map<string, Shard>();
  /**
   * Shards with a first acquire in flight, and whether a release was heard meanwhile: a
   * release between that acquire's refusal and the park would wake nobody, and the new
   * waiter would sleep to the lease's end (seen: a handover of 1.7 s, once in a few).
   */
  private readonly asking = new Map<string, { requests: number; released: boolean }>();
  private readonly stopListening: Array<() => void>;
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock = realClock,
    private readonly random: () => number = Math.random,
  ) {
    this.stopListening = [
      store.leaseChanges.onRelease((shard) => {
        const asking = this.asking.get(shard);
        if (asking !== undefined) asking.released = true;
        if (this.shards.has(shard)) this.dispatch(shard, { kind: "wake" });
      }),
      store.leaseChanges.onRenew((shard, lease) => {
        if (this.shards.has(shard)) this.dispatch(shard, { kind: "renewed", lease });
      }),
    ];
  }

  /** How many requests wait now (a gauge, and the tests' view). */
  get waiting(): number {
    let n = 0;
    for (const shard of this.shards.values()) n += shard.state.queue.length;
    return n;
  }

  /**
   * Acquire `request`'s lease, waiting up to `waitMs` for it while another holds it:
   * answers the grant, a refusal naming whoever was granted it instead, or — at the end
   * of the wait — a plain acquire's answer. `gone` aborts the wait (the client left).
   * `leasable` is the route's check that the shard may be leased at all (defined, or
   * carrying nodes: see mayLease), made before the first acquire by the caller and here
   * before every later one: a definition removed while a standby waits leaves the shard
   * as unleasable as a plain acquire finds it, so the waiter hears that, not a grant.
   */
  async acquire(
    request: AcquireRequest,
    admit: Admit<AcquireInput> | undefined,
    waitMs: number,
    gone: AbortSignal,
    leasable: () => Promise<void> = async () => undefined,
  ): Promise<WaitedOutcome> {
    const arrivedAt = this.clock.now();
    const { shard } = request;
    const asking = this.asking.get(shard) ?? { requests: 0, released: false };
    this.asking.set(shard, asking);
    asking.requests++;
    let first: LeaseOutcome;
    try {
      first = await this.store.acquire(request, admit);
    } finally {
      if (--asking.requests === 0) this.asking.delete(shard);
    }
    if (first.ok || waitMs <= 0 || this.closed || gone.aborted) return { ...first, waitedMs: 0 };
    const releasedMeanwhile = asking.released;
    return new Promise<WaitedOutcome>((resolve, reject) => {
      const waiter: Waiter = {
        request,
        arrivedAt,
        triedAt: arrivedAt,
        admit,
        leasable,
        refusal: first,
        resolve,
        reject,
        endTimer: undefined,
      };
      const leave = () => this.dispatch(shard, { kind: "leave", waiter });
      gone.addEventListener("abort", () => {
        leave();
        this.clock.clear(waiter.endTimer);
        resolve({ ...first, waitedMs: 0 }); // nobody reads it
      });
      const endsAfterMs = waitMs < WAIT_SPREAD_FROM_MS ? waitMs : waitMs * (1 - WAIT_SPREAD * this.random());
      waiter.endTimer = this.clock.set(() => {
        leave();
        waiter.triedAt = this.clock.now();
        this.attempt(waiter).then((outcome) => resolve(this.waited(waiter, outcome)), reject);
      }, endsAfterMs);
      this.dispatch(shard, { kind: "park", waiter, refusal: first });
      if (releasedMeanwhile) this.dispatch(shard, { kind: "wake" });
    });
  }

  /** Answer every waiter now with the refusal it waited behind (the bridge is stopping). */
  close(): void {
    this.closed = true;
    for (const stop of this.stopListening) stop();
    for (const [name, shard] of this.shards) {
      this.clock.clear(shard.timer);
      for (const waiter of shard.state.queue) {
        this.clock.clear(waiter.endTimer);
        waiter.resolve(this.waited(waiter, waiter.refusal));
      }
      this.shards.delete(name);
    }
  }

  /** One acquire for `waiter`, once the shard is still found leasable. */
  private async attempt(waiter: Waiter): Promise<LeaseOutcome> {
    await waiter.leasable();
    return this.store.acquire(waiter.request, waiter.admit);
  }

  /** `outcome` for `waiter`: a grant counts from its try, a refusal from now. */
  private waited(waiter: Waiter, outcome: LeaseOutcome): WaitedOutcome {
    const until = outcome.ok ? waiter.triedAt : this.clock.now();
    return { ...outcome, waitedMs: Math.max(0, Math.floor(until - waiter.arrivedAt)) };
  }

  private dispatch(name: string, event: Parameters<typeof stepWaits<Waiter>>[1]): void {
    let shard = this.shards.get(name);
    if (shard === undefined) {
      if (event.kind !== "park") return;
      shard = { state: noWaits(), timer: undefined, firesAt: 0 };
      this.shards.set(name, shard);
    }
    const { state, actions } = stepWaits(shard.state, event, this.clock.now());
    shard.state = state;
    for (const action of actions) this.perform(name, shard, action);
    if (idle(shard.state) && this.shards.get(name) === shard) this.shards.delete(name);
  }

  private arm(name: string, shard: Shard, at: number): void {
    this.clock.clear(shard.timer);
    shard.firesAt = at;
    shard.timer = this.clock.set(
      () => {
        shard.timer = undefined;
        const due = shard.state.wakeAt;
        if (due !== null && this.clock.now() < due) this.arm(name, shard, due);
        else this.dispatch(name, { kind: "wake" });
      },
      Math.max(0, at - this.clock.now()),
    );
  }

  private perform(name: string, shard: Shard, action: WaitAction<Waiter>): void {
    switch (action.kind) {
      case "timer":
        if (action.at === null) {
          this.clock.clear(shard.timer);
          shard.timer = undefined;
          return;
        }
        // A wake moved later (every renew of a lease with waiters) keeps the armed timer,
        // which arms itself again when it fires early: no timer churn per renew.
        if (shard.timer === undefined || action.at < shard.firesAt) this.arm(name, shard, action.at);
        return;
      case "answer":
        this.clock.clear(action.waiter.endTimer);
        action.waiter.resolve(this.waited(action.waiter, action.outcome));
        return;
      case "try": {
        const { waiter } = action;
        waiter.triedAt = this.clock.now();
        this.attempt(waiter).then(
          (outcome) => this.dispatch(name, { kind: "tried", outcome }),
          (error: unknown) => {
            // Its own refusal (no longer allowed on the shard, or the shard no longer
            // leasable) is its answer; a store failure is tried again for the first
            // waiter, whoever that is then.
            if (!(error instanceof StoreUnavailableError)) {
              this.clock.clear(waiter.endTimer);
              this.dispatch(name, { kind: "leave", waiter });
              waiter.reject(error);
            }
            this.dispatch(name, { kind: "failed" });
          },
        );
        return;
      }
      case "give-back": {
        const { agent } = action.waiter.request;
        this.store
          .release({ shard: name, agent, token: action.token })
          .catch((error: unknown) =>
            logger.warn("lease-give-back-failed", { shard: name, agent, error: String(error) }),
          );
        return;
      }
    }
  }
}
