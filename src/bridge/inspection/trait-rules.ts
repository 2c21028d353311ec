import { z } from "zod";
import { ValidationError } from "../../core/validation.js";
import { MAX_TRAITS_PER_NODE, TraitName } from "../../core/traits/names.js";
import type { InspectionData } from "../../contracts/traits.js";

/** Declarative rules from inspection data to traits (a file, see examples/trait-rules.json). */
export const TraitRule = z.discriminatedUnion("when", [
  /** every PCI vendor found -> PREFIX<VENDOR ID> (e.g. CUSTOM_DEV_VENDORID_15B3) */
  z.strictObject({ when: z.literal("pci_vendor"), prefix: z.string().regex(/^CUSTOM_[A-Z0-9_]*_$/) }),
  /** every NIC vendor in the inventory's interfaces -> PREFIX<VENDOR ID>; the PCI list is a plugin's and may be absent */
  z.strictObject({ when: z.literal("nic_vendor"), prefix: z.string().regex(/^CUSTOM_[A-Z0-9_]*_$/) }),
  /** a specific PCI device (vendor and product) -> trait */
  z.strictObject({
    when: z.literal("pci_device"),
    vendor_id: z.string().regex(/^[0-9a-f]{4}$/),
    product_id: z.string().regex(/^[0-9a-f]{4}$/),
    trait: TraitName,
  }),
  /** a CPU flag (as in /proc/cpuinfo) -> trait, e.g. avx2 -> HW_CPU_X86_AVX2 */
  z.strictObject({ when: z.literal("cpu_flag"), flag: z.string().min(1), trait: TraitName }),
  /** the boot mode inspection saw -> trait, e.g. uefi -> CUSTOM_BOOT_UEFI */
  z.strictObject({ when: z.literal("boot_mode"), mode: z.enum(["uefi", "bios"]), trait: TraitName }),
  /** the CPU architecture -> trait */
  z.strictObject({ when: z.literal("cpu_arch"), arch: z.string().min(1), trait: TraitName }),
  /** the system manufacturer (exact, case-insensitive) -> trait */
  z.strictObject({ when: z.literal("manufacturer"), manufacturer: z.string().min(1), trait: TraitName }),
]);
export type TraitRule = z.output<typeof TraitRule>;

export const TraitRulesFile = z.strictObject({ rules: z.array(TraitRule).min(1) });

function matches(rule: TraitRule, data: InspectionData): string[] {
  const { cpu, boot, system_vendor } = data.inventory;
  switch (rule.when) {
    case "pci_vendor":
      return data.pci_devices.map((d) => `${rule.prefix}${d.vendor_id.toUpperCase()}`);
    case "nic_vendor":
      return data.inventory.interfaces.flatMap(({ vendor }) => {
        const id = /^(?:0x)?([0-9a-f]{4})$/i.exec(vendor ?? "")?.[1];
        return id === undefined ? [] : [`${rule.prefix}${id.toUpperCase()}`];
      });
    case "pci_device":
      return data.pci_devices.some(
        (d) => d.vendor_id.toLowerCase() === rule.vendor_id && d.product_id.toLowerCase() === rule.product_id,
      )
        ? [rule.trait]
        : [];
    case "cpu_flag":
      return cpu?.flags.includes(rule.flag) ? [rule.trait] : [];
    case "boot_mode":
      return boot?.current_boot_mode === rule.mode ? [rule.trait] : [];
    case "cpu_arch":
      return cpu?.architecture === rule.arch ? [rule.trait] : [];
    case "manufacturer":
      return system_vendor?.manufacturer?.toLowerCase() === rule.manufacturer.toLowerCase()
        ? [rule.trait]
        : [];
  }
}

/** The traits inspection finds for a node under `rules`: sorted, each once. Pure. */
export function desiredTraits(data: InspectionData, rules: TraitRule[]): string[] {
  return [...new Set(rules.flatMap((rule) => matches(rule, data)))].sort();
}

/**
 * The traits the rules find in `data`, refused (field `data`) when they are more than a
 * node may hold: such a result could never apply, whatever the node holds now. Pure.
 */
export function inspectionTraits(data: InspectionData, rules: TraitRule[]): string[] {
  const desired = desiredTraits(data, rules);
  if (desired.length > MAX_TRAITS_PER_NODE)
    throw new ValidationError([
      {
        field: "data",
        reason: `the trait rules find ${desired.length} traits in it; a node holds at most ${MAX_TRAITS_PER_NODE} (Ironic's limit)`,
      },
    ]);
  return desired;
}

/**
 * The order of an inspection that finished at `finishedAt` (ISO 8601): its time in ms.
 * The order is remembered per node and everything at or below it is refused from then on,
 * so a time more than `skewS` ahead of `nowS` is refused rather than remembered (one in
 * year 9999 would wedge the node). Pure.
 */
export function finishOrder(finishedAt: string, nowS: number, skewS: number): number {
  const finishedMs = Date.parse(finishedAt);
  if (!Number.isFinite(finishedMs))
    throw new ValidationError([{ field: "finished_at", reason: "must be an ISO 8601 time" }]);
  if (finishedMs > (nowS + skewS) * 1000)
    throw new ValidationError([
      { field: "finished_at", reason: `is in the future (more than ${skewS} s ahead of the bridge's clock)` },
    ]);
  return finishedMs;
}

/**
 * The order a webhook's payload (an inspection result or explicit deltas) is applied in:
 * its sequence, or its finish time in ms. The order is remembered per node and source, and
 * everything at or below it is refused as stale from then on, so an order that cannot be
 * meant is refused rather than remembered:
 * both kinds at once, or one ahead of the bridge's clock by more than `skewS` (the
 * signature window), read as ms since the epoch — a finish time in year 9999, a sequence
 * that is a time in µs, or the largest integer would each wedge the node for good. A
 * counter (1, 2, 3, ...) and a time in ms pass. (A node wedged by an order within the
 * window, or by one an older bridge took, is repaired with POST /v1/nodes/{uuid}/traits/reset.)
 * Pure.
 */
export function webhookOrder(
  delivery: { finished_at?: string | undefined; sequence?: number | undefined },
  nowS: number,
  skewS: number,
): number | undefined {
  if (delivery.sequence !== undefined && delivery.finished_at !== undefined)
    throw new ValidationError([
      { field: "sequence", reason: "give finished_at or sequence, not both: they order differently" },
    ]);
  if (delivery.sequence !== undefined) {
    if (delivery.sequence > (nowS + skewS) * 1000)
      throw new ValidationError([
        {
          field: "sequence",
          reason:
            `is ahead of the bridge's clock read as ms since the epoch (${Math.floor(nowS * 1000)}) ` +
            `by more than ${skewS} s: use a counter or a time in ms`,
        },
      ]);
    return delivery.sequence;
  }
  if (delivery.finished_at === undefined) return undefined;
  return finishOrder(delivery.finished_at, nowS, skewS);
}
