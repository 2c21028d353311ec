import { z } from "zod";
import { STANDARD_TRAIT_NAMES } from "./os-traits.js";

/** The standard trait names nova and Ironic accept (os-traits, see ./os-traits.ts). */
const STANDARD_TRAITS: ReadonlySet<string> = new Set(STANDARD_TRAIT_NAMES);

export const CUSTOM_TRAIT_PATTERN = /^CUSTOM_[A-Z0-9_]+$/;
/** Ironic's limit on traits per node. */
export const MAX_TRAITS_PER_NODE = 50;

export function isStandardTrait(name: string): boolean {
  return STANDARD_TRAITS.has(name);
}

/** A trait name as Ironic accepts it: an os-traits standard name or CUSTOM_[A-Z0-9_]+, ≤255. */
export const TraitName = z
  .string({ error: "must be a string" })
  .max(255, { error: "must be at most 255 characters" })
  .refine((name) => isStandardTrait(name) || CUSTOM_TRAIT_PATTERN.test(name), {
    error: "must be an os-traits standard name or match ^CUSTOM_[A-Z0-9_]+$",
  });
