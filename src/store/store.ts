import { z } from "zod";
import {
  AcquireRequest,
  FenceRequest,
  ReleaseRequest,
  RenewRequest,
  type AcquireRequest as AcquireArgs,
  type FenceRequest as FenceArgs,
  type ReleaseRequest as ReleaseArgs,
  type RenewRequest as RenewArgs,
} from "../core/lease/bounds.js";
import { AgentId, HeartbeatInstance, HostTwinError, ServedShards, ShardName } from "../core/names.js";
import { SERVICE_DOWN_TIME_MS } from "../core/ring/membership.js";
import { parseOrThrow, RepeatParse } from "../core/validation.js";
import { NodeRegistry } from "./node-registry.js";
import type { NodeBackend } from "./ports/nodes.js";
import type { TraitBackend } from "./ports/traits.js";
import { fromStore } from "../core/store-errors.js";
import type { LeaseView } from "../core/lease/machine.js";
import { processClockUs } from "../core/lease/clock.js";
import { fenceKeyDigest, mintFenceKey } from "../core/lease/fence-key.js";
import { MemoryLeases } from "./memory/leases.js";
import type { AcquireInput, FenceInput, LeaseBackend, ReleaseInput, RenewInput } from "./ports/leases.js";
import { MemoryDefinitions } from "./memory/definitions.js";
import type { DefinitionBackend } from "./ports/definitions.js";
import { LeaseChanges } from "./lease-changes.js";

const ReadRequest = z.strictObject({ shard: ShardName });

/** What forgetting a shard did: its lease history dropped from the listings, or why not. */
export type ShardForgetting =
  { kind: "forgotten" } | { kind: "unknown" } | { kind: "held"; current: LeaseView };
/** An agent's heartbeat, and the shards it serves (none: it is in nova's legacy ring pool). */
export const HeartbeatRequest = z.strictObject({
  agent: AgentId,
  shards: ServedShards.default([]).transform((shards) => [...new Set(shards)].sort()),
  instance: HeartbeatInstance.optional(),
});

/**
 * A caller's own check of a request the Store has parsed, made before any I/O: an HTTP
 * route's authorization (the agent acts as itself, may serve the shard). It throws to
 * refuse. The Store's parse is the request's one validation; the caller judges its result.
 */
export type Admit<T> = (input: T) => void;

/**
 * The Store port every caller uses. It validates each request (throwing a
 * ValidationError naming the field, before any I/O, so nothing is written) and hands
 * the parsed input to a backend; a backend failure becomes a StoreUnavailableError.
 * Validation lives here once, not in each backend.
 */
export class Store {
  /** the node registry, on the same store as the leases */
  readonly nodes: NodeRegistry;
  private readonly closers: Array<() => void> = [];
  /** releases, here and announced by other bridges: what waiting acquires wake on */
  readonly leaseChanges = new LeaseChanges();
  /** a holder renews the same lease unchanged every TTL/3: parsed once per shard and token */
  private readonly renews = new RepeatParse(RenewRequest, "shard");

  constructor(
    readonly backend: LeaseBackend,
    nodes: NodeBackend,
    /** node traits, on the same store (used by the trait service), and the queue for Ironic */
    readonly traits: TraitBackend,
    /**
     * The leases of the Ironic queue's partitions, one owner each (src/bridge/ironic/delivery.ts).
     * Default: in this process, where no other bridge competes (the embedded store; it
     * started long ago as far as these leases go: nobody held one before).
     */
    readonly ironicOwners: LeaseBackend = new MemoryLeases(processClockUs, 0),
    /** shard definitions written through the API (parsed in src/bridge/shards/catalog.ts) */
    readonly definitions: DefinitionBackend = new MemoryDefinitions(),
  ) {
    this.nodes = new NodeRegistry(nodes);
  }

  get kind(): LeaseBackend["kind"] {
    return this.backend.kind;
  }

  /**
   * A grant carries a new fence key (`fenceKey`), answered here once and kept by the
   * store only as its digest: what the holder's own process proves the lease with where
   * it presents no bearer token (the fenced Ironic endpoint).
   */
  async acquire(args: AcquireArgs, admit?: Admit<AcquireInput>) {
    const input = parseOrThrow(AcquireRequest, args);
    admit?.(input);
    const minted = mintFenceKey();
    const outcome = await fromStore(() =>
      this.backend.acquire({
        shard: input.shard,
        agent: input.agent,
        ttlMs: input.ttlMs,
        keyDigest: minted.digest,
      }),
    );
    if (outcome.ok) outcome.fenceKey = minted.key;
    return outcome;
  }

  async renew(args: RenewArgs, admit?: Admit<RenewInput>) {
    const input = this.renews.parse(args);
    admit?.(input);
    const outcome = await fromStore(() => this.backend.renew(input));
    if (outcome.ok) this.leaseChanges.renewed(input.shard, outcome);
    return outcome;
  }

  async release(args: ReleaseArgs, admit?: Admit<ReleaseInput>) {
    const input = parseOrThrow(ReleaseRequest, args);
    admit?.(input);
    const outcome = await fromStore(() => this.backend.release(input));
    if (outcome.ok) this.leaseChanges.released(input.shard);
    return outcome;
  }

  /** With `fenceKey`, only the lease minted with that key passes (see acquire). */
  async fence(args: FenceArgs, admit?: Admit<FenceInput>) {
    const { shard, token, fenceKey } = parseOrThrow(FenceRequest, args);
    const input: FenceInput =
      fenceKey === undefined ? { shard, token } : { shard, token, keyDigest: fenceKeyDigest(fenceKey) };
    admit?.(input);
    return fromStore(() => this.backend.fence(input));
  }

  async read(shard: string) {
    const input = parseOrThrow(ReadRequest, { shard });
    return fromStore(() => this.backend.read(input.shard));
  }

  /**
   * `shards`: what the agent serves; none (the default) puts it in the legacy ring pool.
   * `instance`: which process of the agent says so (none: the one slot of senders that
   * name none); what its instances heard within `windowMs` declared is recorded together.
   */
  async heartbeat(
    agent: string,
    shards: string[] = [],
    { instance, windowMs = SERVICE_DOWN_TIME_MS }: { instance?: string; windowMs?: number } = {},
  ) {
    const input = parseOrThrow(HeartbeatRequest, { agent, shards, instance });
    const seen = await fromStore(() =>
      this.backend.heartbeat(input.agent, input.shards, input.instance ?? "", windowMs),
    );
    if ("hostTwin" in seen) throw new HostTwinError(input.agent, seen.hostTwin);
    return seen;
  }

  async agents() {
    return fromStore(() => this.backend.agents());
  }

  /** Every shard the store has lease state for (live or past). */
  async leasedShards() {
    return fromStore(() => this.backend.leasedShards());
  }

  /** Whether `shard` is among leasedShards (lease state nobody forgot). */
  async isListed(shard: string) {
    const input = parseOrThrow(ReadRequest, { shard });
    return fromStore(() => this.backend.isListed(input.shard));
  }

  /**
   * An operator's forgetting of a shard's lease history, so a name leased by mistake
   * leaves GET /v1/shards and the page: refused while a lease on it is live. The lease
   * state itself stays (a few fields), so a later lease's token still climbs above every
   * token granted before. A grant racing the forgetting wins: the lease is read again
   * after the unlisting, and a live one listed again (a grant lists its shard after its
   * lease script, so one the second read misses lists itself after the unlisting).
   */
  async forgetShard(shard: string): Promise<ShardForgetting> {
    const input = parseOrThrow(ReadRequest, { shard });
    return fromStore(async () => {
      const before = await this.backend.read(input.shard);
      if (before.current !== null) return { kind: "held", current: before.current };
      const listed = await this.backend.unlist(input.shard);
      const after = await this.backend.read(input.shard);
      if (after.current !== null) {
        if (listed) await this.backend.relist(input.shard);
        return { kind: "held", current: after.current };
      }
      return { kind: listed ? "forgotten" : "unknown" };
    });
  }

  /** One agent's liveness record, or null when it never sent a heartbeat. */
  async agent(agent: string) {
    return fromStore(() => this.backend.agent(agent));
  }

  /** Drop an agent's liveness record (an operator's: see DELETE /v1/agents/{id}); whether there was one. */
  async forgetAgent(agent: string) {
    const input = parseOrThrow(z.strictObject({ agent: AgentId }), { agent });
    return fromStore(() => this.backend.forgetAgent(input.agent));
  }

  /**
   * The live leases `agent` holds now, by shard: the shards it was ever granted, each
   * lease read and kept only where `agent` is its live holder. O(its grants), never O(every
   * shard). In two steps for a caller that reads more about those shards alongside the
   * leases (grantedShards, then liveLeasesAmong), one round trip saved.
   */
  async leasesOf(agent: string): Promise<Map<string, LeaseView>> {
    return this.liveLeasesAmong(agent, await this.grantedShards(agent));
  }

  /** Every shard `agent` was ever granted (a superset of what it holds now). */
  async grantedShards(agent: string): Promise<string[]> {
    return fromStore(() => this.backend.grantedTo(agent));
  }

  /** The live leases `agent` holds among `shards`, by shard. */
  async liveLeasesAmong(agent: string, shards: readonly string[]): Promise<Map<string, LeaseView>> {
    const held = new Map<string, LeaseView>();
    await Promise.all(
      shards.map(async (shard) => {
        const { current } = await this.read(shard);
        if (current !== null && current.holder === agent) held.set(shard, current);
      }),
    );
    return held;
  }

  async ping() {
    return this.backend.ping();
  }

  /** `stop` runs when the store is closed: what reads it on a timer stops with it. */
  onClose(stop: () => void): void {
    this.closers.push(stop);
  }

  async close() {
    for (const stop of this.closers.splice(0)) stop();
    return this.backend.close();
  }
}
