import { readExample } from "../helpers/examples.js";
import { expect } from "chai";
import fc from "fast-check";
import { existsSync, readFileSync } from "node:fs";
import { parseOrThrow } from "../../src/core/validation.js";
import {
  NO_TRAITS,
  applyDeltas,
  deltasToward,
  type HeldTraits,
  type TraitDelta,
} from "../../src/core/traits/delta.js";
import { DeltaText, InspectionData } from "../../src/contracts/traits.js";
import { TraitRulesFile, desiredTraits } from "../../src/bridge/inspection/trait-rules.js";
import { MAX_TRAITS_PER_NODE, TraitName } from "../../src/core/traits/names.js";
import { OwnershipRegistry } from "../../src/core/traits/ownership.js";

const ownership = new OwnershipRegistry(readExample("ownership.json"));
const rules = parseOrThrow(TraitRulesFile, readExample("trait-rules.json")).rules;
const d = (text: string): TraitDelta => parseOrThrow(DeltaText, text);

describe("Traits: names, ownership, inspection rules, deltas (pure)", () => {
  describe("names", () => {
    it("accepts os-traits standard names and CUSTOM_ names, nothing else", () => {
      for (const ok of ["HW_CPU_X86_AVX2", "COMPUTE_NODE", "CUSTOM_DEV_VENDORID_15B3", "CUSTOM_X"]) {
        expect(TraitName.safeParse(ok).success, ok).to.equal(true);
      }
      for (const bad of [
        "HW_CPU_X86_MADE_UP",
        "custom_x",
        "CUSTOM_",
        "CUSTOM_a",
        `CUSTOM_${"X".repeat(250)}`,
        "",
      ]) {
        expect(TraitName.safeParse(bad).success, bad).to.equal(false);
      }
    });

    it("parses signed deltas and refuses an unsigned one", () => {
      expect(d("+CUSTOM_A")).to.deep.equal({ sign: "+", trait: "CUSTOM_A" });
      expect(d("-HW_CPU_X86_AVX2")).to.deep.equal({ sign: "-", trait: "HW_CPU_X86_AVX2" });
      expect(DeltaText.safeParse("CUSTOM_A").success).to.equal(false);
      expect(DeltaText.safeParse("+custom").success).to.equal(false);
    });
  });

  describe("ownership", () => {
    it("gives COMPUTE_* and OWNER_* to compute by default, and the longest prefix or an exact name wins", () => {
      const registry = new OwnershipRegistry({
        owners: [
          { name: "compute", prefixes: ["COMPUTE_", "OWNER_"] },
          { name: "inspector", prefixes: ["CUSTOM_"] },
          { name: "operator", prefixes: ["CUSTOM_RACK_"], exact: ["CUSTOM_PINNED"] },
        ],
      });
      expect(new OwnershipRegistry().ownerOf("COMPUTE_STATUS_DISABLED")).to.equal("compute");
      expect(new OwnershipRegistry().ownerOf("OWNER_NOVA")).to.equal("compute");
      expect(registry.ownerOf("CUSTOM_DEV_VENDORID_15B3")).to.equal("inspector");
      expect(registry.ownerOf("CUSTOM_RACK_A1")).to.equal("operator");
      expect(registry.ownerOf("CUSTOM_PINNED")).to.equal("operator");
      expect(registry.ownerOf("HW_CPU_X86_AVX2")).to.equal(undefined);
    });

    it("refuses two owners claiming the same prefix", () => {
      expect(
        () =>
          new OwnershipRegistry({
            owners: [
              { name: "a", prefixes: ["CUSTOM_X_"] },
              { name: "b", prefixes: ["CUSTOM_X_"] },
            ],
          }),
      ).to.throw(/CUSTOM_X_ is claimed by both a and b/);
    });
  });

  describe("inspection rules", () => {
    it("maps an inventory to traits: PCI vendors, CPU flags, boot mode", () => {
      const data = parseOrThrow(InspectionData, readExample("inspection-result.json"));
      expect(desiredTraits(data, rules)).to.deep.equal([
        "CUSTOM_BOOT_UEFI",
        "CUSTOM_DEV_VENDORID_15B3",
        "CUSTOM_DEV_VENDORID_8086",
        "HW_CPU_X86_AVX2",
        "HW_CPU_X86_AVX512F",
        "HW_CPU_X86_VMX",
      ]);
    });

    const peerInventory = new URL("../../../shared/peers/fake-inventory.json", import.meta.url);
    it("reads the inventory the real ironic-inspector peer is fed", function () {
      if (!existsSync(peerInventory)) this.skip();
      const data = parseOrThrow(InspectionData, JSON.parse(readFileSync(peerInventory, "utf8")));
      expect(desiredTraits(data, rules)).to.deep.equal([
        "CUSTOM_BOOT_UEFI",
        "CUSTOM_DEV_VENDORID_8086",
        "HW_CPU_X86_AVX2",
        "HW_CPU_X86_VMX",
      ]);
    });

    it("reads NIC vendors from the inventory's interfaces, passing over null and malformed ones", () => {
      const data = parseOrThrow(InspectionData, {
        inventory: {
          interfaces: [{ vendor: "0x15B3" }, { vendor: "8086" }, { vendor: null }, { vendor: "0xZZ" }, {}],
        },
      });
      expect(desiredTraits(data, [{ when: "nic_vendor", prefix: "CUSTOM_NIC_" }])).to.deep.equal([
        "CUSTOM_NIC_15B3",
        "CUSTOM_NIC_8086",
      ]);
    });
  });

  describe("deltas", () => {
    const withCompute: HeldTraits = {
      holders: { COMPUTE_NODE: "compute", OWNER_NOVA: "compute" },
      generation: 3,
    };
    const found = [
      "CUSTOM_BOOT_UEFI",
      "CUSTOM_DEV_VENDORID_15B3",
      "CUSTOM_DEV_VENDORID_8086",
      "HW_CPU_X86_AVX2",
    ];

    it("adds what inspection found and later removes a stale dynamic trait, never touching compute's", () => {
      const first = deltasToward(withCompute, found, "inspector", ownership);
      expect(first.every((x) => x.sign === "+")).to.equal(true);
      const after = applyDeltas(withCompute, first, "inspector", ownership);
      if (!after.ok) throw new Error(JSON.stringify(after.problems));
      expect(after.state.generation).to.equal(4);
      // The Intel NIC is gone at the next inspection.
      const next = deltasToward(
        after.state,
        found.filter((t) => !t.endsWith("8086")),
        "inspector",
        ownership,
      );
      expect(next).to.deep.equal([d("-CUSTOM_DEV_VENDORID_8086")]);
      const final = applyDeltas(after.state, next, "inspector", ownership);
      expect(final.ok && Object.keys(final.state.holders).sort()).to.deep.equal([
        "COMPUTE_NODE",
        "CUSTOM_BOOT_UEFI",
        "CUSTOM_DEV_VENDORID_15B3",
        "HW_CPU_X86_AVX2",
        "OWNER_NOVA",
      ]);
    });

    it("removes a stale trait in the inspector's namespace even when it predates the bridge", () => {
      const legacy: HeldTraits = { holders: { CUSTOM_DEV_VENDORID_14E4: "ironic" }, generation: 1 };
      expect(deltasToward(legacy, [], "inspector", ownership)).to.deep.equal([
        d("-CUSTOM_DEV_VENDORID_14E4"),
      ]);
    });

    it("refuses a request touching another owner's trait, whole: nothing applied", () => {
      const result = applyDeltas(
        withCompute,
        [d("+CUSTOM_BOOT_UEFI"), d("-COMPUTE_NODE"), d("-OWNER_NOVA")],
        "inspector",
        ownership,
      );
      expect(result).to.deep.equal({
        ok: false,
        problems: [
          { trait: "COMPUTE_NODE", reason: "owned by compute", owner: "compute" },
          { trait: "OWNER_NOVA", reason: "owned by compute", owner: "compute" },
        ],
      });
    });

    it("refuses +X and -X in one request, and a node past 50 traits", () => {
      const both = applyDeltas(NO_TRAITS, [d("+CUSTOM_A"), d("-CUSTOM_A")], "operator", ownership);
      expect(both.ok === false && both.problems[0]).to.deep.equal({
        trait: "CUSTOM_A",
        reason: "both added and removed in one request",
      });
      const many = Array.from({ length: MAX_TRAITS_PER_NODE + 1 }, (_, i) => d(`+CUSTOM_T${i}`));
      const full = applyDeltas(NO_TRAITS, many, "operator", ownership);
      expect(full.ok === false && full.problems[0]!.reason).to.match(
        /would hold 51 traits; Ironic allows 50/,
      );
      expect(applyDeltas(NO_TRAITS, many.slice(0, 50), "operator", ownership).ok).to.equal(true);
    });

    it("changes nothing on a replay: same state, same generation", () => {
      const once = applyDeltas(withCompute, [d("+CUSTOM_BOOT_UEFI")], "inspector", ownership);
      if (!once.ok) throw new Error("refused");
      const twice = applyDeltas(once.state, [d("+CUSTOM_BOOT_UEFI")], "inspector", ownership);
      expect(twice).to.deep.equal({ ok: true, state: once.state, applied: [] });
    });

    it("never lets a source change a trait another source owns or holds (property, seeded)", () => {
      const sources = ["compute", "inspector", "operator", "other"];
      const traits = [
        "COMPUTE_NODE",
        "OWNER_NOVA",
        "CUSTOM_BOOT_UEFI",
        "CUSTOM_RACK_A",
        "HW_CPU_X86_AVX2",
        "CUSTOM_FREE",
      ];
      const delta = fc.record({
        sign: fc.constantFrom("+" as const, "-" as const),
        trait: fc.constantFrom(...traits),
      });
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.constantFrom(...sources), fc.array(delta, { maxLength: 5 })), {
            maxLength: 30,
          }),
          (requests) => {
            let state: HeldTraits = NO_TRAITS;
            for (const [source, deltas] of requests) {
              const result = applyDeltas(state, deltas, source, ownership);
              if (!result.ok) continue; // refused whole: state untouched by construction
              for (const trait of traits) {
                const before = state.holders[trait];
                const after = result.state.holders[trait];
                if (before === after) continue;
                // Something changed: it must be this source's own doing, on a trait it may touch.
                const owner = ownership.ownerOf(trait);
                expect(
                  owner === undefined || owner === source,
                  `${source} changed ${trait} owned by ${owner}`,
                ).to.equal(true);
                if (before !== undefined)
                  expect(before, `${source} removed ${trait} held by ${before}`).to.satisfy(
                    (h: string) => h === source || owner === source,
                  );
              }
              state = result.state;
            }
          },
        ),
        { numRuns: 500, seed: 4 },
      );
    });
  });
});
