import { z } from "zod";
import { TraitName } from "./names.js";

/** Who asserts traits: compute, the inspector, operators, or another named source. */
export const OwnerName = z
  .string({ error: "must be a string" })
  .regex(/^[a-z][a-z0-9_-]{0,62}$/, { error: "must be 1..63 of a-z 0-9 _ - starting with a letter" });

/** A prefix namespace: an upper-case trait prefix ending in "_". */
const TraitPrefix = z
  .string({ error: "must be a string" })
  .regex(/^[A-Z][A-Z0-9_]*_$/, { error: "must be upper case and end with _ (e.g. CUSTOM_DEV_VENDORID_)" });

export const OwnershipFile = z.strictObject({
  owners: z.array(
    z.strictObject({
      name: OwnerName,
      exact: z.array(TraitName).default([]),
      prefixes: z.array(TraitPrefix).default([]),
    }),
  ),
});
export type OwnershipFile = z.input<typeof OwnershipFile>;

/** Compute owns what nova writes itself (COMPUTE_NODE, COMPUTE_STATUS_DISABLED, OWNER_NOVA…). */
export const DEFAULT_OWNERSHIP: OwnershipFile = {
  owners: [{ name: "compute", prefixes: ["COMPUTE_", "OWNER_"] }],
};

/**
 * Which source owns which traits, by exact name or prefix namespace. An exact name wins
 * over any prefix, and a longer prefix over a shorter one, so an operator can own
 * `CUSTOM_RACK_A` inside an inspector's `CUSTOM_` namespace. Pure: no I/O.
 */
export class OwnershipRegistry {
  private readonly exact = new Map<string, string>();
  private readonly prefixes: Array<{ prefix: string; owner: string }> = [];

  constructor(file: OwnershipFile = DEFAULT_OWNERSHIP) {
    const parsed = OwnershipFile.parse(file);
    for (const owner of parsed.owners) {
      for (const name of owner.exact)
        this.claim(this.exact.get(name), name, owner.name, () => this.exact.set(name, owner.name));
      for (const prefix of owner.prefixes) {
        const taken = this.prefixes.find((p) => p.prefix === prefix)?.owner;
        this.claim(taken, prefix, owner.name, () => this.prefixes.push({ prefix, owner: owner.name }));
      }
    }
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  private claim(taken: string | undefined, what: string, owner: string, set: () => void): void {
    if (taken !== undefined && taken !== owner) {
      throw new Error(`ownership: ${what} is claimed by both ${taken} and ${owner}`);
    }
    set();
  }

  /** The owner of `trait`, or undefined when no source claims it. */
  ownerOf(trait: string): string | undefined {
    return this.exact.get(trait) ?? this.prefixes.find((p) => trait.startsWith(p.prefix))?.owner;
  }
}
