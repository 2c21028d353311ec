import type { MergedRecord } from "./ports/ironic-queue.js";

/**
 * Fold one commit's changes into a node's record (ironic-enqueue.lua does the same in
 * Redis): the last sign of each trait wins. Each Ironic call sets or unsets one trait, so
 * applying the record leaves Ironic as applying every change in order would; the steps
 * between are skipped. Answers the record and how many traits it gained (its pending
 * changes grow by that many).
 */
export function foldChanges(
  record: MergedRecord | null,
  deltas: readonly string[],
  nowMs: number,
): { record: MergedRecord; added: number } {
  const folded: MergedRecord = record ?? { since: nowMs, traits: {} };
  let added = 0;
  for (const delta of deltas) {
    const trait = delta.slice(1);
    if (!(trait in folded.traits)) added++;
    folded.traits[trait] = delta[0] as "+" | "-";
  }
  return { record: folded, added };
}
