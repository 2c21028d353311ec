import { exampleInspector, readExample } from "../helpers/examples.js";
import { expect } from "chai";
import fc from "fast-check";
import { bridgeApp } from "../helpers/app.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { call, postWebhook, testAuthority, wholeNode } from "../helpers/http.js";

/**
 * Random and mutated payloads thrown at the webhook, correctly signed so they reach the
 * parser and the rules: never a 5xx, and a refused delivery never changes a node's traits.
 */
const NODE = "6a0e1d2c-b4a5-4697-8877-665544332211";
const inspection = readExample("inspection-result.json");

const traitish = fc.oneof(
  fc.constantFrom(
    "CUSTOM_A",
    "CUSTOM_DEV_VENDORID_8086",
    "COMPUTE_NODE",
    "HW_CPU_X86_AVX2",
    "OWNER_NOVA",
    "bad",
    "",
  ),
  fc.string({ maxLength: 20 }),
);
const delta = fc.tuple(fc.constantFrom("+", "-", "", "*"), traitish).map(([s, t]) => `${s}${t}`);
const hex = (min: number, max: number) =>
  fc
    .array(fc.constantFrom(..."0123456789abcdefABCDEF"), { minLength: min, maxLength: max })
    .map((c) => c.join(""));
const node = fc.constantFrom(NODE, NODE.toUpperCase(), "not-a-uuid", "00000000-0000-4000-8000-000000000009");
const payload = fc.oneof(
  fc.record(
    { kind: fc.constant("deltas"), node, deltas: fc.array(delta, { maxLength: 6 }) },
    { requiredKeys: ["kind"] },
  ),
  fc.record(
    {
      kind: fc.constant("inspection"),
      node,
      sequence: fc.oneof(fc.nat(), fc.integer({ min: -5, max: 5 }), fc.constant(1.5)),
      data: fc.oneof(
        fc.constant(inspection),
        fc.record({
          inventory: fc.record({ cpu: fc.record({ flags: fc.array(fc.string({ maxLength: 8 })) }) }),
          pci_devices: fc.array(
            fc.record({
              vendor_id: hex(0, 5),
              product_id: hex(4, 4),
            }),
            { maxLength: 3 },
          ),
        }),
        fc.anything(),
      ),
    },
    { requiredKeys: ["kind"] },
  ),
  fc.anything(),
);

for (const backend of backendsUnderTest()) {
  describe(`Inspector webhook fuzz: ${backend.name}`, function () {
    this.timeout(120_000);
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, {
        authority: testAuthority(),
        inspector: exampleInspector(),
      }),
    );

    it("never answers 5xx; a refused delivery leaves the node's traits as they were (seeded)", async () => {
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-a" }));
      await ctx.store.traits.commit(NODE, 0, {
        holders: { COMPUTE_NODE: "compute" },
        generation: 1,
        lastOrder: {},
      });
      const traits = async () => (await call(`${ctx.base}/v1/nodes/${NODE}/traits`, "GET")).body;
      const statuses = new Map<number, number>();
      await fc.assert(
        fc.asyncProperty(payload, async (body) => {
          const before = await traits();
          const raw = JSON.stringify(body) ?? "null";
          const { status } = await postWebhook(ctx.base, null, { raw });
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          expect(status, raw).to.be.below(500);
          const after = await traits();
          if (status !== 200) expect(after, raw).to.deep.equal(before);
          expect(after.traits.find((t: { name: string }) => t.name === "COMPUTE_NODE")?.owner, raw).to.equal(
            "compute",
          );
        }),
        { numRuns: backend.name === "memory" ? 400 : 150, seed: 29 },
      );
      // The payloads reached the rules both ways: some applied, some refused as bad input.
      expect(statuses.get(200) ?? 0, JSON.stringify([...statuses])).to.be.greaterThan(0);
      expect(statuses.get(400) ?? 0, JSON.stringify([...statuses])).to.be.greaterThan(0);
    });
  });
}
