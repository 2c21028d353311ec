import type { FenceOutcome, LeaseOutcome, ReadOutcome, ReleaseOutcome } from "../../core/lease/machine.js";

/** The store's clock at the moment it answered, in integer microseconds. */
export interface StoreTime {
  atUs: number;
}

/** An agent's liveness record, judged by the store's clock. */
export interface AgentLiveness {
  agent: string;
  /** store time of the last heartbeat, ms since the epoch */
  lastSeenMs: number;
  /** how long ago that was, by the store's clock at the time of the listing */
  ageMs: number;
  /**
   * the shards the agent said it serves in that heartbeat (nova's `[ironic] shard`); none
   * means it is in the legacy pool that nova's hash ring spreads unsharded nodes over
   */
  serves: string[];
}

/** Inputs after validation: every field present and within its bounds. */
export interface AcquireInput {
  shard: string;
  agent: string;
  ttlMs: number;
  /** what the grant keeps of the fence key minted for it (see lease/fence-key.ts); none: "" */
  keyDigest?: string;
}
export interface RenewInput {
  shard: string;
  agent: string;
  ttlMs: number;
  token: number;
}
export interface ReleaseInput {
  shard: string;
  agent: string;
  token: number;
}
export interface FenceInput {
  shard: string;
  token: number;
  /** when given (not ""), only the lease minted with the key of this digest passes */
  keyDigest?: string;
}

/**
 * What a lease store backend does. Backends receive validated input only (see Store)
 * and must give the outcomes the lease state machine (src/core/lease/machine.ts) defines.
 */
export interface LeaseBackend {
  readonly kind: "memory" | "redis";
  acquire(input: AcquireInput): Promise<LeaseOutcome & StoreTime>;
  renew(input: RenewInput): Promise<LeaseOutcome & StoreTime>;
  release(input: ReleaseInput): Promise<ReleaseOutcome & StoreTime>;
  fence(input: FenceInput): Promise<FenceOutcome & StoreTime>;
  read(shard: string): Promise<ReadOutcome & StoreTime>;
  /**
   * Record `agent` seen now, its process `instance` serving `serves` — unless another
   * agent with a record is the same host to nova (hostKey): then nothing is written and
   * that agent's id is answered. What the agent serves is recorded as what each of its
   * instances declared last, together, counting the instances heard within `windowMs`
   * (an agent and a `run` of one id, each heartbeating its own shards, add up rather than
   * take turns); a sender that names no instance is the instance "".
   */
  heartbeat(
    agent: string,
    serves: string[],
    instance: string,
    windowMs: number,
  ): Promise<AgentLiveness | { hostTwin: string }>;
  agents(): Promise<AgentLiveness[]>;
  /** one agent's liveness record, if it ever sent a heartbeat */
  agent(agent: string): Promise<AgentLiveness | null>;
  /** drop `agent`'s liveness record (its next heartbeat makes a new one); whether there was one */
  forgetAgent(agent: string): Promise<boolean>;
  /**
   * Every shard with lease state (live or past), so listings miss no holder: from a
   * directory the store keeps as leases are granted, never a scan of the keyspace.
   */
  leasedShards(): Promise<string[]>;
  /**
   * The shards `agent` was ever granted a lease on: a superset of those it holds now,
   * which callers check lease by lease. Recorded with every grant, before the grant is
   * answered, so no lease its holder knows of is missing.
   */
  grantedTo(agent: string): Promise<string[]>;
  /** whether `shard` is among leasedShards */
  isListed(shard: string): Promise<boolean>;
  /**
   * Take `shard` out of leasedShards (an operator's forgetting of it, see Store.forgetShard);
   * its lease state stays, so its next token still climbs above every earlier one. A grant
   * lists it again. Answers whether it was listed.
   */
  unlist(shard: string): Promise<boolean>;
  /** List `shard` again (a grant that raced its unlisting). */
  relist(shard: string): Promise<void>;
  /** resolves when the backend can serve requests; rejects otherwise */
  ping(): Promise<void>;
  close(): Promise<void>;
}
