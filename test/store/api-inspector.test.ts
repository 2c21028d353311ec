import { exampleInspector, readExample, withoutVendor } from "../helpers/examples.js";
import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { call, postWebhook, TEST_TOKENS, TEST_WEBHOOK_SECRET, wholeNode } from "../helpers/http.js";
import { signedHeaders } from "../../src/contracts/webhook-signature.js";
import { testAuthority } from "../helpers/http.js";

const NODE = "5f0e1d2c-b4a5-4697-8877-665544332211";
const inspection = readExample("inspection-result.json");

interface Sent {
  status: number;
  body: any;
  replay: boolean;
}

for (const backend of backendsUnderTest()) {
  describe(`Inspector webhook: ${backend.name}`, () => {
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, {
        authority: testAuthority(),
        inspector: exampleInspector(),
      }),
    );

    const send = (payload: unknown, options: Parameters<typeof postWebhook>[2] = {}): Promise<Sent> =>
      postWebhook(ctx.base, payload, options);
    const traitsOf = async () => (await call(`${ctx.base}/v1/nodes/${NODE}/traits`, "GET")).body;
    const inspected = (finishedAt: string, data = inspection) => ({
      kind: "inspection",
      node: NODE,
      finished_at: finishedAt,
      data,
    });

    beforeEach(async () => {
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-a" }));
      // What nova-compute put there: the inspector must never touch these.
      await ctx.store.traits.commit(NODE, 0, {
        holders: { COMPUTE_NODE: "compute" },
        generation: 1,
        lastOrder: {},
      });
    });

    it("turns an inspection into + deltas, and a later one without the Intel NIC into its removal", async () => {
      const first = await send(inspected("2026-11-29T10:00:00Z"));
      expect(first.status).to.equal(200);
      expect(first.body.applied).to.deep.equal([
        "+CUSTOM_BOOT_UEFI",
        "+CUSTOM_DEV_VENDORID_15B3",
        "+CUSTOM_DEV_VENDORID_8086",
        "+HW_CPU_X86_AVX2",
        "+HW_CPU_X86_AVX512F",
        "+HW_CPU_X86_VMX",
      ]);
      // The Intel NIC is gone: from the PCI list and from the inventory's interfaces.
      const withoutIntel = withoutVendor(inspection, "8086");
      const second = await send(inspected("2026-11-29T11:00:00Z", withoutIntel));
      expect(second.body.applied).to.deep.equal(["-CUSTOM_DEV_VENDORID_8086"]);
      const traits = await traitsOf();
      expect(traits.generation).to.equal(3);
      expect(traits.traits.find((t: { name: string }) => t.name === "COMPUTE_NODE")).to.deep.equal({
        name: "COMPUTE_NODE",
        owner: "compute",
      });
      expect(traits.traits.map((t: { name: string }) => t.name)).to.not.include("CUSTOM_DEV_VENDORID_8086");
      expect(traits.traits.find((t: { name: string }) => t.name === "HW_CPU_X86_AVX2").owner).to.equal(
        "inspector",
      );
    });

    it("refuses an inspection older than one applied (409), changing nothing", async () => {
      await send(inspected("2026-11-29T11:00:00Z"));
      const before = await traitsOf();
      const old = await send(inspected("2026-11-29T10:00:00Z", { ...inspection, pci_devices: [] }));
      expect(old.status).to.equal(409);
      expect(old.body.errors[0].code).to.equal("shardbridge.traits.stale");
      expect(await traitsOf()).to.deep.equal(before);
    });

    it("answers a repeated delivery id with the first answer and applies nothing twice", async () => {
      const first = await send(
        { kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X"] },
        { delivery: "d-1" },
      );
      const again = await send(
        { kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X"] },
        { delivery: "d-1" },
      );
      expect(again).to.deep.equal({ ...first, replay: true });
      expect((await traitsOf()).generation).to.equal(2);
    });

    it("a signed request captured and sent again under another delivery id does not match; without an id it is a replay", async () => {
      // A deltas delivery with no order: nothing but the memory keeps a copy from applying.
      const body = JSON.stringify({ kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X"] });
      const post = (headers: Record<string, string>) =>
        fetch(`${ctx.base}/v1/inspector/webhook`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${TEST_TOKENS.inspector}`,
            "content-type": "application/json",
            ...headers,
          },
          body,
        });
      const signed = signedHeaders(TEST_WEBHOOK_SECRET, body, Date.now() / 1000, "d-sig-1");
      expect((await post(signed)).status).to.equal(200);
      const generation = (await traitsOf()).generation;
      const undo = JSON.stringify({ kind: "deltas", node: NODE, deltas: ["-CUSTOM_GPU_X"] });
      await send(JSON.parse(undo), { delivery: "d-sig-undo" });
      // The first request again, byte for byte, under a new id: refused, the undo stands.
      const moved = await post({ ...signed, "x-shardbridge-delivery": "d-sig-2" });
      expect(moved.status).to.equal(401);
      expect((await moved.json()).errors[0].code).to.equal("shardbridge.inspector.bad_signature");
      const withoutId = Object.fromEntries(
        Object.entries(signed).filter(([k]) => k !== "x-shardbridge-delivery"),
      );
      expect((await post(withoutId)).status, "the id taken away").to.equal(401);
      expect((await traitsOf()).traits.map((t: { name: string }) => t.name)).to.not.include("CUSTOM_GPU_X");
      expect((await traitsOf()).generation).to.equal(generation + 1);

      // Signed without an id: the very same request twice is applied once, the copy a replay.
      const anonymous = signedHeaders(TEST_WEBHOOK_SECRET, body, Date.now() / 1000);
      const first = await post(anonymous);
      const again = await post(anonymous);
      expect([first.status, again.status]).to.deep.equal([200, 200]);
      expect(again.headers.get("x-shardbridge-replay")).to.equal("true");
      expect(await again.json()).to.deep.equal(await first.json());
      expect((await traitsOf()).generation).to.equal(generation + 2);
    });

    it("refuses a malformed delivery id (400 naming the header's field) and applies nothing", async () => {
      const before = await traitsOf();
      const payload = { kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X"] };
      for (const delivery of ["has space", "x".repeat(129), "semi;colon"]) {
        const res = await send(payload, { delivery });
        expect(res.status, delivery).to.equal(400);
        expect(res.body.errors[0].field).to.equal("delivery");
        expect(res.body.errors[0].detail).to.match(/1\.\.128/);
      }
      expect(await traitsOf()).to.deep.equal(before);
    });

    it("answers copies of one delivery sent at once with one answer: applied once, the rest replays of it", async () => {
      // An inspector that retries on a timeout can send the same delivery again while the
      // first is in flight. The copies race for the node's compare-and-set; each that
      // loses must find the winner's answer, not apply again (nor be refused as stale).
      // Only Redis interleaves them (the embedded store runs each request to its end in one
      // turn), so only the Redis run can catch a regression: it did, 4 copies applying.
      const payload = inspected("2026-11-29T12:00:00Z");
      const sent = await Promise.all(Array.from({ length: 8 }, () => send(payload, { delivery: "d-race" })));
      const applied = sent.filter((s) => !s.replay);
      expect(applied, "one copy applied").to.have.length(1);
      expect(applied[0]!.status).to.equal(200);
      for (const copy of sent) expect({ ...copy, replay: false }).to.deep.equal(applied[0]);
      expect((await traitsOf()).generation, "one commit").to.equal(2);
    });

    it("does not remember a delivery for an unknown node: sent again once the node exists, it applies", async () => {
      const later = "6a0b7f4e-3c2d-4e1f-8a9b-0c1d2e3f4a5b";
      const payload = { kind: "deltas", node: later, deltas: ["+CUSTOM_LATE"] };
      const first = await send(payload, { delivery: "d-late" });
      expect(first.status).to.equal(404);
      expect(
        (await call(`${ctx.base}/v1/nodes/${later}`, "PUT", wholeNode({ shard: "rack-a" }))).status,
      ).to.be.oneOf([200, 201]);
      const again = await send(payload, { delivery: "d-late" });
      expect(again).to.deep.include({ status: 200, replay: false });
      const replayed = await send(payload, { delivery: "d-late" });
      expect(replayed).to.deep.include({ status: 200, replay: true });
    });

    it("refuses deltas on compute's traits (422 naming trait and owner), whole", async () => {
      const before = await traitsOf();
      const res = await send({ kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X", "-COMPUTE_NODE"] });
      expect(res.status).to.equal(422);
      expect(res.body.errors).to.have.length(1);
      expect(res.body.errors[0]).to.include({ code: "shardbridge.traits.not_owned", field: "COMPUTE_NODE" });
      expect(res.body.errors[0].detail).to.match(/owned by compute/);
      expect(await traitsOf()).to.deep.equal(before);
      const both = await send({ kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X", "-CUSTOM_GPU_X"] });
      expect(both.status).to.equal(422);
      expect(await traitsOf()).to.deep.equal(before);
    });

    it("authenticates every delivery: unsigned, wrongly signed or stale-stamped is 401; other roles 403", async () => {
      const payload = { kind: "deltas", node: NODE, deltas: ["+CUSTOM_GPU_X"] };
      expect((await send(payload, { secret: "not-the-secret" })).body.errors[0].code).to.equal(
        "shardbridge.inspector.bad_signature",
      );
      expect((await send(payload, { ts: Math.floor(Date.now() / 1000) - 301 })).body.errors[0].code).to.equal(
        "shardbridge.inspector.stale_timestamp",
      );
      const unsigned = await fetch(`${ctx.base}/v1/inspector/webhook`, {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_TOKENS.inspector}`, "content-type": "application/json" },
        body: JSON.stringify(payload),
      });
      expect(unsigned.status).to.equal(401);
      // Matched as express would match it: a trailing slash reaches the webhook, not a 404.
      const slashed = await fetch(`${ctx.base}/v1/inspector/webhook/`, {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_TOKENS.inspector}`, "content-type": "application/json" },
        body: JSON.stringify(payload),
      });
      expect(slashed.status).to.equal(401);
      expect((await send(payload, { token: TEST_TOKENS.agent("compute-0") })).status).to.equal(403);
      expect((await traitsOf()).generation).to.equal(1);
    });

    it("answers bad input with 4xx naming the problem and applies nothing", async () => {
      const cases: Array<[unknown, number, string]> = [
        [
          { kind: "deltas", node: "00000000-0000-4000-8000-00000000abcd", deltas: ["+CUSTOM_X"] },
          404,
          "shardbridge.node.not_found",
        ],
        [{ kind: "deltas", node: NODE, deltas: ["+lowercase"] }, 400, "shardbridge.validation"],
        [{ kind: "deltas", node: NODE, deltas: ["CUSTOM_X"] }, 400, "shardbridge.validation"],
        [{ kind: "inspection", node: NODE, data: inspection }, 400, "shardbridge.validation"],
        [{ kind: "unknown", node: NODE }, 400, "shardbridge.validation"],
      ];
      for (const [payload, status, code] of cases) {
        const res = await send(payload);
        expect(res.status, JSON.stringify(res.body)).to.equal(status);
        expect(res.body.errors[0].code).to.equal(code);
      }
      // 60 PCI vendors: 60 traits, more than a node may hold. Large enough (over 32 KiB)
      // to be decoded in the worker thread, which refuses it there.
      const crowded = {
        ...inspection,
        pci_devices: Array.from({ length: 1500 }, (_, i) => ({
          vendor_id: (0x1000 + (i % 60)).toString(16),
          product_id: "0001",
          class: "020000",
        })),
      };
      const refused = await send(inspected("2026-01-01T00:00:00Z", crowded));
      expect(refused.status).to.equal(400);
      expect(refused.body.errors[0].field).to.equal("data");
      expect(refused.body.errors[0].detail).to.match(/find 6\d traits in it; a node holds at most 50/);
      const malformed = await send(null, { raw: '{"kind":' });
      expect(malformed.body.errors[0].code).to.equal("shardbridge.body.malformed");
      expect((await traitsOf()).generation).to.equal(1);
    });
  });
}
