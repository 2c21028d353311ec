import { createHash, randomBytes } from "node:crypto";

/**
 * A lease's fence key (see FenceKey in domain/lease.ts) and what the store keeps of it.
 * The store holds only the key's SHA-256: a look at the store's keys (an operator's
 * HGETALL, a MONITOR, a replica's copy) shows nothing that passes the fence, and the
 * store's comparison of digests tells a timing observer nothing about the key itself.
 */
export interface MintedFenceKey {
  /** answered to the agent granted the lease, once */
  key: string;
  /** kept with the lease */
  digest: string;
}

/** The digest a lease keeps of `key`. */
export function fenceKeyDigest(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** A new key for a grant: 128 bits from the operating system's random source. */
export function mintFenceKey(): MintedFenceKey {
  const key = randomBytes(16).toString("hex");
  return { key, digest: fenceKeyDigest(key) };
}
