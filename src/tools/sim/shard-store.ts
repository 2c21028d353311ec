import type { LeaseOperation, OutcomeOf, ShardLeaseState, StoreLineage } from "../../core/lease/machine.js";
import { LeaseTable } from "../../store/memory/leases.js";
import type { Cruise } from "./cruise.js";
import type { Keeper } from "./shards-mode.js";

/** What became of a fenced write (SimStore.write). */
export type WriteVerdict = "refused" | "passed" | "passed-stale";

/**
 * The shards mode's store: the embedded store's lease table (LeaseTable, the pure machine
 * stepped per shard, expiry judged by the store's clock, which is true time), and what
 * Redis's faults do to it: a restart empties it, a failover promotes a replica that
 * stopped following some time before.
 */
export class SimStore {
  table = new LeaseTable<number>();
  /** the store process started here (µs); the recovery wait counts from it */
  bootUs = -3_600_000_000;
  /** the store answers nothing before this (µs): it is restarting, or being failed over to */
  downUntilUs = -1;
  /** standbys told "held", to be woken when the lease is handed back (the driver's shortcut); a new server knows none */
  waiters = new Map<number, Set<Keeper>>();
  /**
   * Which history of writes the server continues (StoreLineage): Redis's master_replid
   * and whether the server was promoted. Only a scenario with a failover needs one; a
   * store of one process its whole life has none, as the embedded store.
   */
  private lineage: StoreLineage | undefined;
  private lineages = 0;
  /** what the replica to be promoted next has: the shards as they were when it stopped following */
  private replica: Map<number, ShardLeaseState> | null = null;
  /** the clock reading the rules get: one object, refilled (the rules keep nothing of it) */
  private readonly clock = { nowUs: 0, bootUs: 0, lineage: undefined as StoreLineage | undefined };
  /**
   * The healthy holders' renews outside the queue; set once both exist (each uses the
   * other). None where every renew is an event (the shipped keepers, shipped-keepers.ts).
   */
  cruise: Cruise | null = null;

  constructor(failsOver: boolean) {
    this.lineage = failsOver ? { id: "first", promoted: false } : undefined;
  }

  /**
   * Apply `op` to `shard` at true time `atUs`. `renew`: a renew, whose granted lease may be
   * written into the shard's state (see `transition`). The shard's cruising holder's renews
   * due before now run first, and its cruise ends when anything else changes the shard.
   */
  op<Op extends LeaseOperation>(shard: number, op: Op, atUs: number, renew = false): OutcomeOf<Op> {
    const cruise = this.cruise;
    const cruiser = cruise === null || cruise.inCruise ? null : cruise.cruiserOf[shard]!;
    if (cruiser !== null) cruise!.catchUp(cruiser);
    // The store's clock reads whole microseconds, as Redis TIME does and the lease rules
    // expect: a fractional reading would make a fresh grant show 5,999 ms left.
    const clock = this.clock;
    clock.nowUs = Math.floor(atUs);
    clock.bootUs = Math.floor(this.bootUs);
    clock.lineage = this.lineage;
    const step = this.table.apply(shard, op, clock, renew && cruiser === null);
    // Anything but the holder's renew that changes the shard ends its cruise.
    if (cruiser !== null && step.changed) cruise!.end(cruiser);
    return step.outcome;
  }

  /**
   * A fenced write of `agent` under `token` reaching the store at `atUs`: refused, or
   * passed — held against the store's own record, a pass for anyone but the live holder
   * is a safety failure ("passed-stale").
   */
  write(shard: number, agent: string, token: number, atUs: number): WriteVerdict {
    if (!this.op(shard, { kind: "fence", token }, atUs).allowed) return "refused";
    const live = this.table.states.get(shard)?.lease;
    return live?.token !== token || live.holder !== agent || live.expiresAtUs <= atUs
      ? "passed-stale"
      : "passed";
  }

  /** Redis restarts empty at `nowUs`, answering again `downUs` later. */
  restart(nowUs: number, downUs: number): void {
    this.table = new LeaseTable();
    this.waiters = new Map();
    this.downUntilUs = nowUs + downUs;
    this.bootUs = nowUs + downUs;
    // A restarted Redis has a new replication id too (it continues no one).
    if (this.lineage !== undefined) this.lineage = { id: `restart-${++this.lineages}`, promoted: false };
    // Standbys that were told "held" would come back at that lease's end: they do, and
    // find the store recovering or empty, as real standbys do.
  }

  /** The replica to be promoted at the next failover stops following. */
  replicaStops(): void {
    // A copy: the master's states go on being renewed in place (see `op`).
    this.replica = new Map(
      [...this.table.states].map(([shard, state]) => [
        shard,
        { ...state, lease: state.lease === null ? null : { ...state.lease } },
      ]),
    );
  }

  /** The master is lost at `nowUs`; the replica is promoted, and reached `downUs` later. */
  failover(nowUs: number, downUs: number): void {
    // The promoted replica has what it had when it stopped following: the writes of
    // the last `lag` are lost. Its new replication id, and its being promoted, are what
    // the lease rules see (lineageHold): every shard is held for a TTL from its first
    // operation, since a holder may be acting on a lost renew.
    if (this.replica !== null) this.table = new LeaseTable(this.replica);
    this.replica = null;
    this.waiters = new Map();
    this.downUntilUs = nowUs + downUs;
    this.lineage = { id: `promoted-${++this.lineages}`, promoted: true };
  }
}
