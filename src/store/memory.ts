import {
  EMPTY_SHARD_STATE,
  transition,
  type LeaseOperation,
  type OutcomeOf,
  type ShardLeaseState,
} from "../lease/machine.js";
import { sortAgents } from "./agents.js";
import { processClockUs, type ClockUs } from "./clock.js";
import type {
  AcquireInput,
  AgentSeen,
  FenceInput,
  LeaseBackend,
  ReleaseInput,
  RenewInput,
  StoreTime,
} from "./port.js";

/**
 * The embedded default: leases in this process's memory, run by the pure state
 * machine. Every operation is synchronous under the hood, so each one is atomic.
 * State is lost when the process exits; tokens still increase across restarts because
 * the machine folds the clock into every new token.
 */
export class MemoryBackend implements LeaseBackend {
  readonly kind = "memory" as const;
  private readonly shards = new Map<string, ShardLeaseState>();
  private readonly lastSeen = new Map<string, { us: number; serves: string[] }>();

  private readonly bootUs: number;

  /**
   * `bootUs`: when this store's state began, default now. Leases on shards it has no
   * history of are refused for one TTL after that (see recoveryWaitMs); pass an earlier
   * time only where no agent can have held a lease before, as tests do.
   */
  constructor(
    private readonly clockUs: ClockUs = processClockUs,
    bootUs?: number,
  ) {
    this.bootUs = bootUs ?? clockUs();
  }

  private apply<Op extends LeaseOperation>(shard: string, op: Op): Promise<OutcomeOf<Op> & StoreTime> {
    const atUs = this.clockUs();
    const { outcome, state } = transition(this.shards.get(shard) ?? EMPTY_SHARD_STATE, op, {
      nowUs: atUs,
      bootUs: this.bootUs,
    });
    if (state.lastToken !== 0) this.shards.set(shard, state);
    return Promise.resolve({ ...outcome, atUs });
  }

  acquire({ shard, agent, ttlMs }: AcquireInput) {
    return this.apply(shard, { kind: "acquire", agent, ttlMs });
  }

  renew({ shard, agent, token, ttlMs }: RenewInput) {
    return this.apply(shard, { kind: "renew", agent, token, ttlMs });
  }

  release({ shard, agent, token }: ReleaseInput) {
    return this.apply(shard, { kind: "release", agent, token });
  }

  fence({ shard, token }: FenceInput) {
    return this.apply(shard, { kind: "fence", token });
  }

  read(shard: string) {
    return this.apply(shard, { kind: "read" });
  }

  heartbeat(agent: string, serves: string[]): Promise<AgentSeen> {
    const nowUs = this.clockUs();
    this.lastSeen.set(agent, { us: nowUs, serves: [...serves] });
    return Promise.resolve({ agent, lastSeenMs: Math.floor(nowUs / 1000), ageMs: 0, serves: [...serves] });
  }

  agents(): Promise<AgentSeen[]> {
    const nowMs = Math.floor(this.clockUs() / 1000);
    const seen = [...this.lastSeen].map(([agent, { us, serves }]) => {
      const lastSeenMs = Math.floor(us / 1000);
      return { agent, lastSeenMs, ageMs: nowMs - lastSeenMs, serves: [...serves] };
    });
    return Promise.resolve(sortAgents(seen));
  }

  async leasedShards(): Promise<string[]> {
    return [...this.shards.keys()];
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
