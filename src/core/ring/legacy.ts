import HashRing from "hashring";
import type { LegacyRing, RingKind } from "./kinds.js";
import { NOVA_PARTITIONS, ToozRing } from "./tooz.js";

export type { LegacyRing } from "./kinds.js";

/**
 * Ketama as the `hashring` package does it (libketama: 160 points per server, 32-bit
 * points). Not nova's assignment: it is here to show how another ring would move nodes.
 */
class KetamaRing implements LegacyRing {
  readonly kind = "ketama";
  private readonly ring: HashRing | null;
  readonly members: readonly string[];

  constructor(members: string[]) {
    this.members = [...new Set(members)].sort();
    // The package's own lookup cache only pays off for repeated keys; nodes are looked up once per build.
    this.ring =
      this.members.length === 0 ? null : new HashRing([...this.members], "md5", { "max cache size": 1 });
  }

  memberOf(uuid: string): string | null {
    return this.ring?.get(uuid) ?? null;
  }
}

/**
 * A ring of `kind` over compute hosts, as nova builds it: host names lower-cased (nova's
 * `host.lower()`), each once.
 */
export function buildRing(kind: RingKind, hosts: Iterable<string>, partitions = NOVA_PARTITIONS): LegacyRing {
  const members = [...hosts].map((h) => h.toLowerCase());
  return kind === "tooz" ? new ToozRing(members, partitions) : new KetamaRing(members);
}
