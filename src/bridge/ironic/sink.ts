import type { IronicClient } from "../../upstream/ironic-client.js";

/**
 * Apply one change ("+TRAIT" / "-TRAIT") to a node in Ironic with a single-trait call.
 * Each call is idempotent (PUT adds or keeps, DELETE removes or finds it absent: 404 on
 * the trait counts as done), so a change delivered twice leaves the same state; the
 * whole list is never replaced, so traits set by others survive.
 */
export async function applyDelta(
  ironic: IronicClient,
  node: string,
  delta: string,
): Promise<"added" | "removed" | "absent"> {
  const trait = delta.slice(1);
  if (delta.startsWith("+")) {
    await ironic.addTrait(node, trait);
    return "added";
  }
  return ironic.removeTrait(node, trait);
}
