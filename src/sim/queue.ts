/**
 * The simulator's event queue: a binary heap ordered by time, then by the order events
 * were scheduled, so equal times run in a fixed order and every run is the same.
 */
export class EventQueue {
  private times: number[] = [];
  private seqs: number[] = [];
  private actions: Array<() => void> = [];
  private nextSeq = 0;
  /** events run so far */
  processed = 0;
  /** the time of the event running now, µs */
  now = 0;

  /** Run `action` at `atUs` (never before now). */
  at(atUs: number, action: () => void): void {
    const time = Math.max(atUs, this.now);
    const seq = this.nextSeq++;
    let i = this.times.length;
    this.times.push(time);
    this.seqs.push(seq);
    this.actions.push(action);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.before(parent, time, seq)) break;
      this.move(parent, i);
      i = parent;
    }
    this.place(i, time, seq, action);
  }

  /** Run events in order until the queue is empty or the next one is after `untilUs`. */
  runUntil(untilUs: number, onProgress?: (nowUs: number) => void): void {
    let sinceReport = 0;
    while (this.times.length > 0 && this.times[0]! <= untilUs) {
      const action = this.pop();
      action();
      this.processed++;
      if (onProgress !== undefined && ++sinceReport === 100_000) {
        sinceReport = 0;
        onProgress(this.now);
      }
    }
    this.now = untilUs;
  }

  private pop(): () => void {
    const top = this.actions[0]!;
    this.now = this.times[0]!;
    const lastTime = this.times.pop()!;
    const lastSeq = this.seqs.pop()!;
    const lastAction = this.actions.pop()!;
    const n = this.times.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= n) break;
        const right = left + 1;
        const child = right < n && this.before(right, this.times[left]!, this.seqs[left]!) ? right : left;
        if (!this.before(child, lastTime, lastSeq)) break;
        this.move(child, i);
        i = child;
      }
      this.place(i, lastTime, lastSeq, lastAction);
    }
    return top;
  }

  /** Does slot `i` come before (time, seq)? */
  private before(i: number, time: number, seq: number): boolean {
    const t = this.times[i]!;
    return t < time || (t === time && this.seqs[i]! < seq);
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from]!;
    this.seqs[to] = this.seqs[from]!;
    this.actions[to] = this.actions[from]!;
  }

  private place(i: number, time: number, seq: number, action: () => void): void {
    this.times[i] = time;
    this.seqs[i] = seq;
    this.actions[i] = action;
  }
}
