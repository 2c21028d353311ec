/**
 * Who manages what, over time, and what that adds up to. A unit is a shard (weighted by
 * its nodes) or a node (weight 1); an agent "manages" a unit while it believes it may act
 * on it. Pure bookkeeping: every change comes with its time.
 */
export interface CoverageSummary {
  /** node-seconds with nobody managing */
  unmanagedNodeSeconds: number;
  /** node-seconds with two or more agents managing: the split-brain exposure */
  doubleManagedNodeSeconds: number;
  /** times a node got a manager other than its previous one */
  nodesMoved: number;
  /** the longest a node went unmanaged, s */
  worstRecoveryS: number;
  /** 99th percentile of node unmanaged spells, s (0 when there were none) */
  p99RecoveryS: number;
  /** unmanaged spells, counted per node */
  unmanagedSpells: number;
}

/** A point of the over-time series: nodes unmanaged and nodes double-managed from `atUs` on. */
export interface CoveragePoint {
  atUs: number;
  unmanaged: number;
  doubleManaged: number;
}

export class Coverage {
  private readonly managers: Int32Array;
  private readonly lastManager: Int32Array;
  private readonly unmanagedSince: Float64Array;
  private unmanagedWeight = 0;
  private multiWeight = 0;
  private lastUs: number;
  private unmanagedUs = 0;
  private multiUs = 0;
  private moved = 0;
  /** [duration µs, weight] of each closed unmanaged spell */
  private readonly spells: Array<[number, number]> = [];
  readonly series: CoveragePoint[] = [];

  constructor(
    private readonly weights: ArrayLike<number>,
    startUs: number,
  ) {
    this.managers = new Int32Array(weights.length);
    this.lastManager = new Int32Array(weights.length).fill(-1);
    this.unmanagedSince = new Float64Array(weights.length).fill(startUs);
    for (let u = 0; u < weights.length; u++) this.unmanagedWeight += weights[u]!;
    this.lastUs = startUs;
    this.series.push({ atUs: startUs, unmanaged: this.unmanagedWeight, doubleManaged: 0 });
  }

  private advance(atUs: number): void {
    const dt = atUs - this.lastUs;
    if (dt > 0) {
      this.unmanagedUs += this.unmanagedWeight * dt;
      this.multiUs += this.multiWeight * dt;
      this.lastUs = atUs;
    }
  }

  private record(atUs: number): void {
    const last = this.series[this.series.length - 1]!;
    if (last.unmanaged === this.unmanagedWeight && last.doubleManaged === this.multiWeight) return;
    if (last.atUs === atUs) this.series.pop();
    this.series.push({ atUs, unmanaged: this.unmanagedWeight, doubleManaged: this.multiWeight });
  }

  /** `agent` starts managing `unit` at `atUs`. */
  add(unit: number, agent: number, atUs: number): void {
    this.advance(atUs);
    const w = this.weights[unit]!;
    const before = this.managers[unit]!++;
    if (before === 0) {
      this.unmanagedWeight -= w;
      const spell = atUs - this.unmanagedSince[unit]!;
      if (spell > 0) this.spells.push([spell, w]);
    }
    if (before === 1) this.multiWeight += w;
    if (this.lastManager[unit] !== -1 && this.lastManager[unit] !== agent) this.moved += w;
    this.lastManager[unit] = agent;
    this.record(atUs);
  }

  /** `agent` stops managing `unit` at `atUs`. */
  remove(unit: number, atUs: number): void {
    this.advance(atUs);
    const w = this.weights[unit]!;
    const before = this.managers[unit]!--;
    if (before <= 0) throw new Error(`coverage: unit ${unit} removed with no manager`);
    if (before === 1) {
      this.unmanagedWeight += w;
      this.unmanagedSince[unit] = atUs;
    }
    if (before === 2) this.multiWeight -= w;
    this.record(atUs);
  }

  managersOf(unit: number): number {
    return this.managers[unit]!;
  }

  /** Close the books at `endUs`: spells still open count up to the end. */
  summary(endUs: number): CoverageSummary {
    this.advance(endUs);
    const spells = [...this.spells];
    for (let u = 0; u < this.managers.length; u++) {
      if (this.managers[u] === 0 && endUs > this.unmanagedSince[u]!)
        spells.push([endUs - this.unmanagedSince[u]!, this.weights[u]!]);
    }
    spells.sort((a, b) => a[0] - b[0]);
    const total = spells.reduce((n, [, w]) => n + w, 0);
    let p99 = 0;
    let seen = 0;
    for (const [duration, w] of spells) {
      seen += w;
      if (seen >= 0.99 * total) {
        p99 = duration;
        break;
      }
    }
    return {
      unmanagedNodeSeconds: this.unmanagedUs / 1e6,
      doubleManagedNodeSeconds: this.multiUs / 1e6,
      nodesMoved: this.moved,
      worstRecoveryS: (spells[spells.length - 1]?.[0] ?? 0) / 1e6,
      p99RecoveryS: p99 / 1e6,
      unmanagedSpells: total,
    };
  }
}
