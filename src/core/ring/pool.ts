import type { RingKind } from "./kinds.js";
import { buildRing, type LegacyRing } from "./legacy.js";
import { RING_REBUILD_MS } from "./membership.js";

export interface LegacyPoolOptions {
  kind?: RingKind;
  /** how long one membership snapshot is used before it is read again (nova: 60 s) */
  rebuildMs?: number;
  /** ms clock; injectable for tests */
  nowMs?: () => number;
}

/** A membership snapshot, as one nova-compute holds it between two periodic tasks. */
export interface PoolSnapshot {
  members: readonly string[];
  builtAtMs: number;
}

/**
 * The legacy ring pool with nova's timing: the membership is read at most once per
 * `rebuildMs` (like nova's periodic task), not on every request, so a service that just
 * died or came back moves nodes only at the next rebuild, as it would under nova.
 */
export class LegacyPool {
  private snapshot: PoolSnapshot | null = null;
  private loading: Promise<PoolSnapshot> | null = null;
  /** rings by member set: one per distinct "snapshot + the asking agent" */
  private readonly rings = new Map<string, LegacyRing>();
  readonly kind: RingKind;
  readonly rebuildMs: number;
  private readonly nowMs: () => number;

  constructor(
    private readonly loadMembers: () => Promise<string[]>,
    options: LegacyPoolOptions = {},
  ) {
    this.kind = options.kind ?? "tooz";
    this.rebuildMs = options.rebuildMs ?? RING_REBUILD_MS;
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** The current snapshot, read again once it is `rebuildMs` old. */
  async current(): Promise<PoolSnapshot> {
    if (this.snapshot !== null && this.nowMs() - this.snapshot.builtAtMs < this.rebuildMs)
      return this.snapshot;
    // One read for all requests that find the snapshot old at the same moment.
    this.loading ??= this.loadMembers()
      .then((members) => (this.snapshot = { members: [...members].sort(), builtAtMs: this.nowMs() }))
      .finally(() => (this.loading = null));
    return this.loading;
  }

  /** The ring `agent` would build: the pool's members plus itself (nova adds its own host). */
  async ringFor(agent: string): Promise<{ ring: LegacyRing; snapshot: PoolSnapshot }> {
    const snapshot = await this.current();
    const members = [...new Set([...snapshot.members, agent.toLowerCase()])].sort();
    const key = members.join("\n");
    let ring = this.rings.get(key);
    if (ring === undefined) {
      ring = buildRing(this.kind, members);
      // Every agent in the pool asks with the same set; only agents outside it add one.
      if (this.rings.size >= 16) this.rings.delete(this.rings.keys().next().value!);
      this.rings.set(key, ring);
    }
    return { ring, snapshot };
  }
}
