import HashRing from "hashring";
import type { RingKind } from "../domain/ring.js";
import { NOVA_PARTITIONS, ToozRing } from "./tooz.js";

/** A ring over compute hosts that places a node by its UUID. */
export interface LegacyRing {
  readonly kind: RingKind;
  readonly members: readonly string[];
  /** the member a node belongs to; null for an empty ring */
  memberOf(uuid: string): string | null;
}

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

class NovaToozRing implements LegacyRing {
  readonly kind = "tooz";
  private readonly ring: ToozRing;

  constructor(members: string[], partitions: number) {
    this.ring = new ToozRing(members, partitions);
  }

  get members(): readonly string[] {
    return this.ring.members;
  }

  memberOf(uuid: string): string | null {
    return this.ring.memberOf(uuid);
  }
}

/**
 * A ring of `kind` over compute hosts, as nova builds it: host names lower-cased (nova's
 * `host.lower()`), each once.
 */
export function buildRing(kind: RingKind, hosts: Iterable<string>, partitions = NOVA_PARTITIONS): LegacyRing {
  const members = [...hosts].map((h) => h.toLowerCase());
  return kind === "tooz" ? new NovaToozRing(members, partitions) : new KetamaRing(members);
}
