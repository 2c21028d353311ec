import { yieldToLoop } from "../runtime/loop.js";
import type { LegacyRing } from "../core/ring/legacy.js";

/** Where the free unsharded nodes come from: their uuids page by page, and a version. */
export interface FreeNodes {
  /** unsharded nodes without an instance, in pages */
  pages(): AsyncIterable<readonly string[]>;
  /** changes whenever those nodes change */
  version(): Promise<number>;
}

interface Assignment {
  version: number;
  /** ring member -> the free nodes it places there */
  byMember: Map<string, string[]> | null;
  refreshing: Promise<void> | null;
}

/** Rings whose assignment is kept (one per distinct member set, see LegacyPool). */
const KEPT = 16;

/**
 * What nova's ring places on each member, computed once per (member set, pool version)
 * rather than on every request: nova places the whole pool on every periodic task, and
 * so do we, but once for all askers, in pages that yield to the event loop between them.
 * While a new version is computed the previous assignment is served; the caller drops
 * nodes that left the pool since (it reads each node anyway), and nodes that joined show
 * once the computation is done, as they would at nova's next periodic task.
 */
export class LegacyAssignments {
  private readonly assignments = new Map<string, Assignment>();

  constructor(private readonly free: FreeNodes) {}

  /** The free nodes `ring` places on `member` (lower-cased, as ring members are). */
  async shareOf(ring: LegacyRing, member: string): Promise<readonly string[]> {
    const key = ring.members.join("\n");
    let entry = this.assignments.get(key);
    if (entry === undefined) {
      if (this.assignments.size >= KEPT) this.assignments.delete(this.assignments.keys().next().value!);
      entry = { version: -1, byMember: null, refreshing: null };
      this.assignments.set(key, entry);
    }
    const version = await this.free.version();
    if (entry.version !== version && entry.refreshing === null) {
      const target = entry;
      target.refreshing = this.compute(ring)
        .then((byMember) => {
          target.byMember = byMember;
          target.version = version;
        })
        .finally(() => (target.refreshing = null));
    }
    if (entry.byMember === null) await entry.refreshing;
    return entry.byMember?.get(member.toLowerCase()) ?? [];
  }

  private async compute(ring: LegacyRing): Promise<Map<string, string[]>> {
    const byMember = new Map<string, string[]>(ring.members.map((m) => [m, []]));
    for await (const page of this.free.pages()) {
      for (const uuid of page) {
        const member = ring.memberOf(uuid);
        if (member !== null) byMember.get(member)?.push(uuid);
      }
      await yieldToLoop();
    }
    return byMember;
  }
}
