import { Coverage } from "./coverage.js";
import type { SimHost } from "./host.js";
import type { WriteVerdict } from "./shard-store.js";

/** A lease activity interval, for the timeline chart. */
export interface ActiveSpell {
  shard: number;
  agent: number;
  fromUs: number;
  toUs: number | null;
}

/** What a run of the shards mode found, either driver's. */
export interface ShardsModeResult {
  coverage: Coverage;
  /** renews run outside the queue (see Cruise); counted among the events simulated */
  cruisedRenews: number;
  staleWritesRefused: number;
  /** writes that passed fencing without being the live holder's: must be 0 */
  staleWritesAccepted: number;
  spells: ActiveSpell[];
}

/** One agent's keeper of one shard, as the books know it. */
export interface ShardKeeper {
  readonly host: SimHost;
  readonly shard: number;
}

/**
 * The shards mode's books, kept the same way by either driver of the keepers
 * (shards-mode.ts, shipped-keepers.ts): who believes they may act on which shard from
 * when to when (the coverage, its node-seconds and spells, and the timeline chart's
 * spells), and the fenced writes' verdicts.
 */
export class ShardActivity<K extends ShardKeeper> {
  readonly result: ShardsModeResult;
  private readonly open = new Map<K, ActiveSpell>();

  /**
   * The books start at the scenario's time 0, which the run's clock reads as `originUs`
   * (a run that warms up first, shipped-keepers.ts); every time given is the run's.
   */
  constructor(
    shardWeights: ArrayLike<number>,
    private readonly originUs = 0,
  ) {
    this.result = {
      coverage: new Coverage(shardWeights, 0),
      cruisedRenews: 0,
      staleWritesRefused: 0,
      staleWritesAccepted: 0,
      spells: [],
    };
  }

  /** A fenced write's verdict (SimStore.write), counted. */
  write(verdict: WriteVerdict): void {
    if (verdict === "refused") this.result.staleWritesRefused++;
    else if (verdict === "passed-stale") this.result.staleWritesAccepted++;
  }

  /** `k` may act on its shard from `atUs`. */
  begin(k: K, runUs: number): void {
    const atUs = runUs - this.originUs;
    this.result.coverage.add(k.shard, k.host.index, atUs);
    const spell = { shard: k.shard, agent: k.host.index, fromUs: atUs, toUs: null };
    this.open.set(k, spell);
    this.result.spells.push(spell);
  }

  /** `k` stops acting at `atUs` (it lost the lease, stopped, or died); nothing if it was not acting. */
  end(k: K, runUs: number): void {
    const spell = this.open.get(k);
    if (spell === undefined) return;
    const atUs = runUs - this.originUs;
    this.result.coverage.remove(k.shard, atUs);
    spell.toUs = atUs;
    this.open.delete(k);
  }
}
