import { readFileSync } from "node:fs";
import { parseOrThrow } from "../../src/core/validation.js";
import { TraitRulesFile } from "../../src/bridge/inspection/trait-rules.js";
import { OwnershipRegistry } from "../../src/core/traits/ownership.js";
import { TEST_WEBHOOK_SECRET } from "./http.js";

/** A file of the repository's examples/, parsed as JSON. */
export function readExample(name: string): any {
  return JSON.parse(readFileSync(new URL(`../../examples/${name}`, import.meta.url), "utf8"));
}

/** The inspector set-up the examples describe: their trait rules and ownership, the tests' secret. */
export function exampleInspector() {
  return {
    rules: parseOrThrow(TraitRulesFile, readExample("trait-rules.json")).rules,
    ownership: new OwnershipRegistry(readExample("ownership.json")),
    secret: TEST_WEBHOOK_SECRET,
  };
}

/** An inspection result with one vendor's hardware gone: from the PCI list and from the NICs. */
export function withoutVendor(inspection: any, vendorId: string): any {
  return {
    ...inspection,
    inventory: {
      ...inspection.inventory,
      interfaces: inspection.inventory.interfaces.filter(
        (i: { vendor?: string }) => i.vendor?.replace(/^0x/, "") !== vendorId,
      ),
    },
    pci_devices: inspection.pci_devices.filter((d: { vendor_id: string }) => d.vendor_id !== vendorId),
  };
}
