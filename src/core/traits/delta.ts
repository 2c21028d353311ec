import { MAX_TRAITS_PER_NODE } from "./names.js";
import type { OwnershipRegistry } from "./ownership.js";

/** One signed change to one trait: `+` add, `-` remove. */
export interface TraitDelta {
  sign: "+" | "-";
  trait: string;
}

export const formatDelta = (delta: TraitDelta): string => `${delta.sign}${delta.trait}`;

/**
 * A node's traits with the source that holds each, and a generation that grows with
 * every change. Pure data.
 */
export interface HeldTraits {
  /** trait -> the source that asserted it */
  holders: Record<string, string>;
  generation: number;
}

export const NO_TRAITS: HeldTraits = Object.freeze({ holders: {}, generation: 0 });

/** Why a delta was refused: the trait, the reason, and who owns it when that is why. */
export interface DeltaProblem {
  trait: string;
  reason: string;
  owner?: string;
}

export type DeltaResult =
  { ok: true; state: HeldTraits; applied: TraitDelta[] } | { ok: false; problems: DeltaProblem[] };

/**
 * Apply `deltas` from `source` to a node's traits, whole or not at all.
 * - A trait a source may touch: not owned by another source in the registry, and, for
 *   a removal, not held by another source either.
 * - `+X` and `-X` in one request is refused; a delta that changes nothing is skipped
 *   (adding a held trait, removing an absent one), so replays change nothing.
 * - More than MAX_TRAITS_PER_NODE traits afterwards is refused.
 */
export function applyDeltas(
  current: HeldTraits,
  deltas: TraitDelta[],
  source: string,
  ownership: OwnershipRegistry,
): DeltaResult {
  const problems: DeltaProblem[] = [];
  const signs = new Map<string, Set<string>>();
  for (const { sign, trait } of deltas) signs.set(trait, (signs.get(trait) ?? new Set()).add(sign));
  for (const [trait, seen] of signs) {
    if (seen.size > 1) problems.push({ trait, reason: "both added and removed in one request" });
  }
  const holders = { ...current.holders };
  const applied: TraitDelta[] = [];
  for (const [trait, seen] of signs) {
    if (seen.size > 1) continue;
    const sign = seen.has("+") ? "+" : "-";
    const owner = ownership.ownerOf(trait);
    if (owner !== undefined && owner !== source) {
      problems.push({ trait, reason: `owned by ${owner}`, owner });
      continue;
    }
    const holder = holders[trait];
    if (sign === "+") {
      if (holder === undefined) {
        holders[trait] = source;
        applied.push({ sign, trait });
      }
      // Held already (by this source, or by another for an unowned trait): nothing to do.
      continue;
    }
    if (holder === undefined) continue;
    if (holder !== source && owner === undefined) {
      problems.push({ trait, reason: `asserted by ${holder}`, owner: holder });
      continue;
    }
    delete holders[trait];
    applied.push({ sign, trait });
  }
  const count = Object.keys(holders).length;
  if (count > MAX_TRAITS_PER_NODE) {
    problems.push({
      trait: "(node)",
      reason: `would hold ${count} traits; Ironic allows ${MAX_TRAITS_PER_NODE}`,
    });
  }
  if (problems.length > 0) return { ok: false, problems };
  const generation = applied.length > 0 ? current.generation + 1 : current.generation;
  return { ok: true, state: { holders, generation }, applied };
}

/**
 * The deltas that take a node from what `source` holds now to `desired`: add what is
 * desired and missing, remove what the source holds — or what lies in its namespaces —
 * that is no longer desired (a NIC that is gone takes its vendor trait with it).
 */
export function deltasToward(
  current: HeldTraits,
  desired: Iterable<string>,
  source: string,
  ownership: OwnershipRegistry,
): TraitDelta[] {
  const want = new Set(desired);
  const deltas: TraitDelta[] = [];
  for (const trait of [...want].sort())
    if (current.holders[trait] === undefined) deltas.push({ sign: "+", trait });
  for (const [trait, holder] of Object.entries(current.holders).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const ours = holder === source || ownership.ownerOf(trait) === source;
    if (ours && !want.has(trait)) deltas.push({ sign: "-", trait });
  }
  return deltas;
}
