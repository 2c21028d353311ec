import type { LeaseView } from "../core/lease/machine.js";

/**
 * Leases handed back on this store, for whoever waits on them (src/bridge/shards/lease-waits.ts):
 * a release through this bridge is told to its own listeners at once, and to the other
 * bridges on the same store through a relay (Redis pub/sub: src/store/announce.ts); what a
 * relay hears from another bridge is told here as `heard`. An expiry is nobody's write and
 * is not announced: a waiter's own timer finds it at the lease's end, which a renew through
 * this bridge moves on (`renewed`).
 */
export class LeaseChanges {
  private readonly listeners = new Set<(shard: string) => void>();
  private readonly renewListeners = new Set<(shard: string, lease: LeaseView) => void>();
  private relay: ((shard: string) => void) | null = null;

  /** A lease of `shard` was released through this bridge. */
  released(shard: string): void {
    this.tell(shard);
    this.relay?.(shard);
  }

  /** Another bridge announced that it released a lease of `shard`. */
  heard(shard: string): void {
    this.tell(shard);
  }

  /** Call `listener` on every release, here or announced; answers how to stop. */
  onRelease(listener: (shard: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * A lease of `shard` was renewed through this bridge: its waiters' wake moves to the new
   * end. Told here only — another bridge's waiters find a renew by their one acquire at the
   * lease's old end, and announcing every renew would cost the store a PUBLISH each.
   */
  renewed(shard: string, lease: LeaseView): void {
    for (const listener of this.renewListeners) listener(shard, lease);
  }

  /** Call `listener` on every renew through this bridge; answers how to stop. */
  onRenew(listener: (shard: string, lease: LeaseView) => void): () => void {
    this.renewListeners.add(listener);
    return () => this.renewListeners.delete(listener);
  }

  /** Send this bridge's releases on to the others, too. */
  relayTo(send: (shard: string) => void): void {
    this.relay = send;
  }

  private tell(shard: string): void {
    for (const listener of this.listeners) listener(shard);
  }
}
