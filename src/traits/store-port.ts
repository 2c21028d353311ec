import type { NodeTraits } from "./delta.js";

/** A node's traits as stored: holders, generation, and the newest order applied per source. */
export interface TraitRecord extends NodeTraits {
  /** source -> the highest inspection order (finish time in ms, or a sequence) applied */
  lastOrder: Record<string, number>;
}

export const EMPTY_TRAIT_RECORD: TraitRecord = Object.freeze({ holders: {}, generation: 0, lastOrder: {} });

/**
 * Where node traits live. Changes are compare-and-set on the generation: the rules run
 * in TypeScript (src/traits/delta.ts, the one definition), and a commit lands only if
 * nobody committed in between, atomically (one Lua script on Redis).
 */
export interface TraitBackend {
  read(uuid: string): Promise<TraitRecord>;
  /** store `next` if the stored generation is still `expected`; answers whether it did */
  commit(uuid: string, expected: number, next: TraitRecord): Promise<boolean>;
  /** the recorded outcome of a webhook delivery, if this id was seen */
  delivery(id: string): Promise<string | null>;
  /** remember a delivery's outcome for `ttlSeconds` */
  recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void>;
}
