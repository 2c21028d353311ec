import { hostKey } from "../../core/names.js";
import {
  EMPTY_SHARD_STATE,
  transition,
  type LeaseOperation,
  type OutcomeOf,
  type ShardLeaseState,
  type StoreClockReading,
  type LeaseView,
  type StoreLineage,
} from "../../core/lease/machine.js";
import { sortAgents } from "../agents-order.js";
import { processClockUs, wallClockUs, type ClockUs } from "../../core/lease/clock.js";
import type {
  AcquireInput,
  AgentLiveness,
  FenceInput,
  LeaseBackend,
  ReleaseInput,
  RenewInput,
  StoreTime,
} from "../ports/leases.js";

/**
 * Leases in memory, a shard's state each, stepped by the pure machine: the embedded
 * store's (MemoryLeases) and the simulator's (src/tools/sim/shard-store.ts), one table so that
 * the simulator runs the store's own step.
 */
/**
 * How far the wall clock and the store's may move apart before the times answers tell are
 * moved with it: well above the jitter of reading two clocks, well below what an operator
 * would notice in a `since` or a `last_seen`.
 */
const TOLD_SLACK_US = 100_000;

export class LeaseTable<Shard> {
  constructor(readonly states = new Map<Shard, ShardLeaseState>()) {}

  /**
   * `op` on `shard` at `clock`; `changed` when it wrote. `reuse`: a renew may write the
   * granted lease into the state it was given (see `transition`).
   */
  apply<Op extends LeaseOperation>(
    shard: Shard,
    op: Op,
    clock: StoreClockReading,
    reuse = false,
  ): { outcome: OutcomeOf<Op>; changed: boolean } {
    const before = this.states.get(shard) ?? EMPTY_SHARD_STATE;
    const { outcome, state } = transition(before, op, clock, reuse);
    // A transition answers the state it was given when it wrote nothing.
    if (state !== before) this.states.set(shard, state);
    return { outcome, changed: state !== before };
  }
}

/**
 * The embedded default: leases in this process's memory, run by the pure state
 * machine. Every operation is synchronous under the hood, so each one is atomic.
 * State is lost when the process exits; tokens still increase across restarts because
 * the machine folds the clock into every new token.
 */
export class MemoryLeases implements LeaseBackend {
  readonly kind = "memory" as const;
  private readonly table = new LeaseTable<string>();
  private readonly shards = this.table.states;
  private readonly lastSeen = new Map<string, { us: number; serves: string[] }>();
  /** agent -> each of its instances' last heartbeat: when, and the shards it declared (see LeaseBackend.heartbeat) */
  private readonly instances = new Map<string, Map<string, { us: number; serves: string[] }>>();
  /** nova's key of a host (hostKey) -> the agent id last recorded under it */
  private readonly hosts = new Map<string, string>();
  /** agent -> the shards it was ever granted (see LeaseBackend.grantedTo) */
  private readonly grants = new Map<string, Set<string>>();
  /** shards with lease state an operator had forgotten (Store.forgetShard) and nobody leased since */
  private readonly unlisted = new Set<string>();

  private readonly bootUs: number;
  /** the clock answers tell their times by (see told) */
  private readonly wallUs: ClockUs;
  /** the wall clock less the store's, as last taken (see shiftUs) */
  private wallShiftUs = 0;

  /**
   * `bootUs`: when this store's state began, default now. Leases on shards it has no
   * history of are refused for one TTL after that (see recoveryWaitMs); pass an earlier
   * time only where no agent can have held a lease before, as tests do. `lineage`: none
   * for a running bridge (this store is one process for its whole life); the differential
   * test passes one to hold the lineage rules to the Lua.
   */
  constructor(
    private readonly clockUs: ClockUs = processClockUs,
    bootUs?: number,
    private readonly lineage: () => StoreLineage | undefined = () => undefined,
    /**
     * The clock answers tell their times by (see told): for the process clock, the wall
     * clock; a clock handed in (the simulator's, a test's virtual one) is its own wall.
     */
    wallUs: ClockUs = clockUs === processClockUs ? wallClockUs : clockUs,
  ) {
    this.bootUs = bootUs ?? clockUs();
    this.wallUs = wallUs;
  }

  /**
   * An answer's times (its `atUs`, a lease's `sinceUs`) on the wall clock: how long ago
   * each was by the store's clock, counted back from the wall clock's now. Leases run on
   * the store's clock; only what an answer tells is moved. A lease view the answer shares
   * with the table is copied, never changed.
   */
  private told<T extends StoreTime & { sinceUs?: number; current?: LeaseView | null }>(answer: T): T {
    const shift = this.shiftUs(answer.atUs);
    if (shift === 0) return answer;
    answer.atUs += shift;
    if (answer.sinceUs !== undefined) answer.sinceUs += shift;
    const current = answer.current;
    if (current !== undefined && current !== null)
      answer.current = {
        holder: current.holder,
        token: current.token,
        ttlMs: current.ttlMs,
        sinceUs: current.sinceUs + shift,
      };
    return answer;
  }

  /**
   * The wall clock less the store's, for an answer read at `nowUs` of the store's clock:
   * taken anew only when the two have moved more than TOLD_SLACK_US apart since it was last
   * taken (a suspended host, a stepped wall clock, a drift that added up). Taken at every
   * answer, it moved with whatever passed between the two clocks' readings (5 ms once in
   * CI), and an agent's last_seen told by a heartbeat and by a listing differed.
   */
  private shiftUs(nowUs: number): number {
    const shift = Math.floor(this.wallUs()) - nowUs;
    if (Math.abs(shift - this.wallShiftUs) > TOLD_SLACK_US) this.wallShiftUs = shift;
    return this.wallShiftUs;
  }

  private apply<Op extends LeaseOperation>(shard: string, op: Op): Promise<OutcomeOf<Op> & StoreTime> {
    const atUs = this.clockUs();
    const lineage = this.lineage();
    const { outcome } = this.table.apply(shard, op, {
      nowUs: atUs,
      bootUs: this.bootUs,
      ...(lineage !== undefined && { lineage }),
    });
    // atUs first: `{ ...outcome, atUs }` would give every outcome a hidden class of its own
    // (see docs/ARCHITECTURE.md, One event loop), and every read of it a cache miss.
    return Promise.resolve(this.told({ atUs, ...outcome }));
  }

  async acquire({ shard, agent, ttlMs, keyDigest = "" }: AcquireInput) {
    const outcome = await this.apply(shard, { kind: "acquire", agent, ttlMs, keyDigest });
    if (outcome.ok) {
      this.unlisted.delete(shard);
      let shards = this.grants.get(agent);
      if (shards === undefined) this.grants.set(agent, (shards = new Set()));
      shards.add(shard);
    }
    return outcome;
  }

  renew({ shard, agent, token, ttlMs }: RenewInput) {
    return this.apply(shard, { kind: "renew", agent, token, ttlMs });
  }

  release({ shard, agent, token }: ReleaseInput) {
    return this.apply(shard, { kind: "release", agent, token });
  }

  fence({ shard, token, keyDigest }: FenceInput) {
    return this.apply(
      shard,
      keyDigest === undefined ? { kind: "fence", token } : { kind: "fence", token, keyDigest },
    );
  }

  read(shard: string) {
    return this.apply(shard, { kind: "read" });
  }

  heartbeat(
    agent: string,
    serves: string[],
    instance: string,
    windowMs: number,
  ): Promise<AgentLiveness | { hostTwin: string }> {
    const key = hostKey(agent);
    const twin = this.hosts.get(key);
    if (twin !== undefined && twin !== agent && this.lastSeen.has(twin))
      return Promise.resolve({ hostTwin: twin });
    this.hosts.set(key, agent);
    const nowUs = this.clockUs();
    // As heartbeat.lua: this instance's shards, with those of the others heard within the window.
    const instances = this.instances.get(agent) ?? new Map<string, { us: number; serves: string[] }>();
    this.instances.set(agent, instances);
    instances.set(instance, { us: nowUs, serves: [...serves] });
    const nowMs = Math.floor(nowUs / 1000);
    const served = new Set<string>();
    for (const [name, heard] of instances)
      if (Math.floor(heard.us / 1000) + windowMs < nowMs) instances.delete(name);
      else for (const shard of heard.serves) served.add(shard);
    const recorded = [...served].sort();
    this.lastSeen.set(agent, { us: nowUs, serves: recorded });
    const lastSeenMs = Math.floor((nowUs + this.shiftUs(nowUs)) / 1000);
    return Promise.resolve({ agent, lastSeenMs, ageMs: 0, serves: [...recorded] });
  }

  /** `agent`'s record as told now: its age by the store's clock, its time on the wall clock (see told). */
  private seen(
    agent: string,
    { us, serves }: { us: number; serves: string[] },
    nowUs: number,
  ): AgentLiveness {
    const ageMs = Math.floor(nowUs / 1000) - Math.floor(us / 1000);
    const lastSeenMs = Math.floor((us + this.shiftUs(nowUs)) / 1000);
    return { agent, lastSeenMs, ageMs, serves: [...serves] };
  }

  agents(): Promise<AgentLiveness[]> {
    const nowUs = this.clockUs();
    return Promise.resolve(sortAgents([...this.lastSeen].map(([agent, r]) => this.seen(agent, r, nowUs))));
  }

  async agent(agent: string): Promise<AgentLiveness | null> {
    const record = this.lastSeen.get(agent);
    return record === undefined ? null : this.seen(agent, record, this.clockUs());
  }

  async forgetAgent(agent: string): Promise<boolean> {
    this.instances.delete(agent);
    return this.lastSeen.delete(agent);
  }

  async leasedShards(): Promise<string[]> {
    return [...this.shards.keys()].filter((shard) => !this.unlisted.has(shard));
  }

  async isListed(shard: string): Promise<boolean> {
    return this.shards.has(shard) && !this.unlisted.has(shard);
  }

  async unlist(shard: string): Promise<boolean> {
    const listed = await this.isListed(shard);
    if (listed) this.unlisted.add(shard);
    return listed;
  }

  async relist(shard: string): Promise<void> {
    this.unlisted.delete(shard);
  }

  async grantedTo(agent: string): Promise<string[]> {
    return [...(this.grants.get(agent) ?? [])];
  }

  /** How many shards have lease state (for tests proving a refusal stored nothing). */
  storedShardCount(): number {
    return this.shards.size;
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
