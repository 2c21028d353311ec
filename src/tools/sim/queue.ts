/**
 * Ranks order events due at the same instant: the timeline's faults first, then holders'
 * renews, then everything else. Within a class: faults and the rest in the order they were
 * scheduled, renews by the keeper's number (`atRenew`). A renew's place among simultaneous
 * events therefore does not depend on when it was scheduled, which is what lets the
 * shards mode run a healthy holder's renews outside the queue (see shards-mode.ts) and
 * still put each one exactly where the queue would have.
 */
const RENEW_RANK = 2 ** 51;
const OTHER_RANK = 2 ** 52;

/**
 * What an event runs: a function of one number. A driver that schedules the same kind of
 * event millions of times makes the function once (per keeper, say) and passes what
 * differs as the number, instead of a closure per event.
 */
export type EventAction = (arg: number) => void;

/**
 * The simulator's event queue: a binary heap ordered by time, then by rank (above), so
 * equal times run in a fixed order and every run is the same.
 */
export class EventQueue {
  private times: number[] = [];
  private ranks: number[] = [];
  private actions: EventAction[] = [];
  private args: number[] = [];
  private nextSeq = 0;
  private nowAction: EventAction = () => undefined;
  private nowArg = 0;
  /** events run so far, and events run outside the queue (`runOutside`) */
  processed = 0;
  /** the time of the event running now, µs */
  now = 0;
  /** the rank of the event running now: with `now`, its place in the order */
  nowRank = 0;

  /** Run `action(arg)` at `atUs` (never before now). */
  at(atUs: number, action: EventAction, arg = 0): void {
    this.push(atUs, OTHER_RANK + this.nextSeq++, action, arg);
  }

  /** Run `action(arg)` at `atUs`, before the renews and the rest due then (a fault). */
  atFirst(atUs: number, action: EventAction, arg = 0): void {
    this.push(atUs, this.nextSeq++, action, arg);
  }

  /**
   * Run the renew of keeper number `keeper` (a small whole number, one per agent and
   * shard) at `atUs`: after the faults due then, before the rest, by keeper number.
   */
  atRenew(atUs: number, keeper: number, action: EventAction, arg = 0): void {
    this.push(atUs, RENEW_RANK + keeper, action, arg);
  }

  /**
   * Run the event running now again at `atUs`, in its class (a frozen process's timer
   * fires when it thaws): a renew keeps its rank, anything else is ranked as scheduled now.
   */
  putOff(atUs: number): void {
    const rank = this.nowRank;
    const again =
      rank >= OTHER_RANK ? OTHER_RANK + this.nextSeq++ : rank >= RENEW_RANK ? rank : this.nextSeq++;
    this.push(atUs, again, this.nowAction, this.nowArg);
  }

  /** The rank `atRenew` gives keeper number `keeper`'s renew. */
  static renewRank(keeper: number): number {
    return RENEW_RANK + keeper;
  }

  /** Does an event at (time, rank) come before the event running now? */
  isBeforeNow(time: number, rank: number): boolean {
    return time < this.now || (time === this.now && rank < this.nowRank);
  }

  /** Count `count` events run outside the queue, as if it had run them. */
  ranOutside(count: number): void {
    this.processed += count;
  }

  /** Count one event fewer: an event of the driver's own bookkeeping, not of the model. */
  uncount(): void {
    this.processed--;
  }

  /** Run events in order until the queue is empty or the next one is after `untilUs`. */
  runUntil(untilUs: number, onProgress?: (nowUs: number) => void): void {
    let sinceReport = 0;
    while (this.times.length > 0 && this.times[0]! <= untilUs) {
      this.pop();
      this.nowAction(this.nowArg);
      this.processed++;
      if (onProgress !== undefined && ++sinceReport === 100_000) {
        sinceReport = 0;
        onProgress(this.now);
      }
    }
    this.now = untilUs;
    this.nowRank = 0;
  }

  /**
   * Run the next event if it is due by `untilUs`: false when none is. For a driver that
   * must let the process's microtasks run between events (`runSettled`, keeper-scheduler.ts).
   */
  runNext(untilUs: number): boolean {
    if (this.times.length === 0 || this.times[0]! > untilUs) return false;
    this.pop();
    this.nowAction(this.nowArg);
    this.processed++;
    return true;
  }

  private push(atUs: number, rank: number, action: EventAction, arg: number): void {
    const time = Math.max(atUs, this.now);
    let i = this.times.length;
    this.times.push(time);
    this.ranks.push(rank);
    this.actions.push(action);
    this.args.push(arg);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.before(parent, time, rank)) break;
      this.move(parent, i);
      i = parent;
    }
    this.place(i, time, rank, action, arg);
  }

  /** Take the first event off the heap: it is the one running now. */
  private pop(): void {
    this.nowAction = this.actions[0]!;
    this.nowArg = this.args[0]!;
    this.now = this.times[0]!;
    this.nowRank = this.ranks[0]!;
    const lastTime = this.times.pop()!;
    const lastRank = this.ranks.pop()!;
    const lastAction = this.actions.pop()!;
    const lastArg = this.args.pop()!;
    const n = this.times.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= n) break;
        const right = left + 1;
        const child = right < n && this.before(right, this.times[left]!, this.ranks[left]!) ? right : left;
        if (!this.before(child, lastTime, lastRank)) break;
        this.move(child, i);
        i = child;
      }
      this.place(i, lastTime, lastRank, lastAction, lastArg);
    }
  }

  /** Does slot `i` come before (time, rank)? */
  private before(i: number, time: number, rank: number): boolean {
    const t = this.times[i]!;
    return t < time || (t === time && this.ranks[i]! < rank);
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from]!;
    this.ranks[to] = this.ranks[from]!;
    this.actions[to] = this.actions[from]!;
    this.args[to] = this.args[from]!;
  }

  private place(i: number, time: number, rank: number, action: EventAction, arg: number): void {
    this.times[i] = time;
    this.ranks[i] = rank;
    this.actions[i] = action;
    this.args[i] = arg;
  }
}
