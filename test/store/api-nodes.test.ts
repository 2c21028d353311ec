import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { call, testAuthority, uuid, wholeNode } from "../helpers/http.js";

for (const backend of backendsUnderTest()) {
  describe(`Node registry over HTTP: ${backend.name}`, () => {
    const catalog = new ShardCatalog([{ name: "spare", description: "kept empty", lease_ttl_ms: 6000 }]);
    const ctx = useApp(backend, (store) => bridgeApp(store, { authority: testAuthority(), catalog }));

    it("creates (201), replaces (200), reads, deletes (204) a node, and 404s an unknown one", async () => {
      const id = uuid(1);
      const created = await call(
        `${ctx.base}/v1/nodes/${id.toUpperCase()}`,
        "PUT",
        wholeNode({ name: "node-1", shard: "rack-a" }),
      );
      expect(created.status).to.equal(201);
      expect(created.body).to.deep.equal({
        uuid: id,
        name: "node-1",
        shard: "rack-a",
        conductor_group: "",
        instance_host: null,
      });
      const replaced = await call(
        `${ctx.base}/v1/nodes/${id}`,
        "PUT",
        wholeNode({ shard: "rack-b", conductor_group: "Group-1" }),
      );
      expect(replaced.status).to.equal(200);
      expect(replaced.body).to.deep.equal({
        uuid: id,
        name: null,
        shard: "rack-b",
        conductor_group: "group-1",
        instance_host: null,
      });
      expect((await call(`${ctx.base}/v1/nodes/${id}`, "GET")).body.shard).to.equal("rack-b");
      expect((await call(`${ctx.base}/v1/nodes/${id}`, "DELETE")).status).to.equal(204);
      const gone = await call(`${ctx.base}/v1/nodes/${id}`, "GET");
      expect(gone.status).to.equal(404);
      expect(gone.body.errors[0].code).to.equal("shardbridge.node.not_found");
      expect((await call(`${ctx.base}/v1/nodes/${id}`, "DELETE")).status).to.equal(404);
      // Nothing of the node is left; on Redis, the registry's mark stays (NodeBackend.mark).
      expect(await backend.storedKeys(ctx.store)).to.equal(backend.name === "memory" ? 0 : 1);
    });

    it("keeps every node in exactly one place when it changes shard", async () => {
      await call(`${ctx.base}/v1/nodes/${uuid(1)}`, "PUT", wholeNode({ shard: "rack-a" }));
      await call(`${ctx.base}/v1/nodes/${uuid(2)}`, "PUT", wholeNode({ shard: "rack-a" }));
      await call(`${ctx.base}/v1/nodes/${uuid(3)}`, "PUT", wholeNode({}));
      await call(`${ctx.base}/v1/nodes/${uuid(1)}`, "PUT", wholeNode({ shard: "rack-b" }));
      await call(`${ctx.base}/v1/nodes/${uuid(2)}`, "PUT", wholeNode({}));
      const inA = (await call(`${ctx.base}/v1/nodes?shard=rack-a`, "GET")).body.nodes;
      const inB = (await call(`${ctx.base}/v1/nodes?shard=rack-b`, "GET")).body.nodes.map(
        (n: { uuid: string }) => n.uuid,
      );
      const pool = (await call(`${ctx.base}/v1/nodes?sharded=false`, "GET")).body.nodes.map(
        (n: { uuid: string }) => n.uuid,
      );
      expect(inA).to.deep.equal([]);
      expect(inB).to.deep.equal([uuid(1)]);
      expect(pool).to.deep.equal([uuid(2), uuid(3)]);
      const shards = (await call(`${ctx.base}/v1/shards`, "GET")).body.shards;
      expect(shards.map((s: { name: string; count: number }) => [s.name, s.count])).to.deep.equal([
        ["None", 2],
        ["rack-b", 1],
        ["spare", 0],
      ]);
    });

    it("filters like Ironic (?shard=a,b, ?sharded=) and pages with limit and marker", async () => {
      const nodes = Array.from({ length: 25 }, (_, i) =>
        wholeNode({ uuid: uuid(i + 1), shard: i % 5 === 0 ? null : `rack-${i % 3}` }),
      );
      expect((await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes })).body).to.deep.equal({
        created: 25,
        updated: 0,
      });
      const two = (await call(`${ctx.base}/v1/nodes?shard=rack-0,rack-1`, "GET")).body.nodes;
      expect(two.every((n: { shard: string }) => ["rack-0", "rack-1"].includes(n.shard))).to.equal(true);
      const sharded = (await call(`${ctx.base}/v1/nodes?sharded=true`, "GET")).body.nodes;
      expect(sharded.length).to.equal(20);
      let url: string | null = `/v1/nodes?limit=10`;
      const seen: string[] = [];
      while (url !== null) {
        const page: { status: number; body: { nodes: Array<{ uuid: string }>; next: string | null } } =
          await call(`${ctx.base}${url}`, "GET");
        seen.push(...page.body.nodes.map((n) => n.uuid));
        url = page.body.next;
      }
      expect(seen).to.deep.equal(nodes.map((n) => n.uuid));
    });

    it("loads 10,000 nodes in one bulk call; a second load updates them", async function () {
      this.timeout(30_000);
      const nodes = Array.from({ length: 10_000 }, (_, i) =>
        wholeNode({ uuid: uuid(i + 1), shard: `rack-${i % 20}`, name: `n-${i}` }),
      );
      expect((await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes })).body).to.deep.equal({
        created: 10_000,
        updated: 0,
      });
      expect((await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes })).body).to.deep.equal({
        created: 0,
        updated: 10_000,
      });
      const shards = (await call(`${ctx.base}/v1/shards`, "GET")).body.shards;
      expect(
        shards
          .filter((s: { name: string }) => s.name.startsWith("rack-"))
          .map((s: { count: number }) => s.count),
      ).to.deep.equal(Array(20).fill(500));
    });

    it("shows the active holder of each shard, since when, in GET /v1/shards", async () => {
      await call(`${ctx.base}/v1/nodes/${uuid(1)}`, "PUT", wholeNode({ shard: "rack-a" }));
      const granted = await call(`${ctx.base}/v1/shards/rack-a/lease`, "POST", { agent: "compute-0" });
      const shards = (await call(`${ctx.base}/v1/shards`, "GET")).body.shards;
      const rackA = shards.find((s: { name: string }) => s.name === "rack-a");
      expect(rackA.lease).to.include({ holder: "compute-0", token: granted.body.token });
      expect(Date.parse(rackA.lease.since)).to.be.closeTo(Date.now(), 5000);
      expect(shards.find((s: { name: string }) => s.name === "spare").lease).to.equal(null);
    });

    describe("bad input: 400 naming the field, nothing written", () => {
      const cases: Array<[string, string, string, unknown, string]> = [
        ["a path that is no uuid", "PUT", "/v1/nodes/not-a-uuid", wholeNode({}), "uuid"],
        ["a bad shard key", "PUT", `/v1/nodes/${uuid(1)}`, wholeNode({ shard: "has space" }), "shard"],
        ["an unknown field", "PUT", `/v1/nodes/${uuid(1)}`, wholeNode({ shard: "a", power: "on" }), "(root)"],
        [
          "a body uuid unlike the path's",
          "PUT",
          `/v1/nodes/${uuid(1)}`,
          wholeNode({ uuid: uuid(2) }),
          "uuid",
        ],
        ["a bad name", "PUT", `/v1/nodes/${uuid(1)}`, wholeNode({ name: "a b" }), "name"],
        [
          "a PUT without shard",
          "PUT",
          `/v1/nodes/${uuid(1)}`,
          { name: null, conductor_group: "", instance_host: null },
          "shard",
        ],
        [
          "a PUT without instance_host",
          "PUT",
          `/v1/nodes/${uuid(1)}`,
          { name: null, shard: null, conductor_group: "" },
          "instance_host",
        ],
        ["an empty PUT body", "PUT", `/v1/nodes/${uuid(1)}`, undefined, "(body)"],
        ["a PUT body that is a list", "PUT", `/v1/nodes/${uuid(1)}`, [wholeNode({})], "(body)"],
        ["a PATCH of an unknown field", "PATCH", `/v1/nodes/${uuid(1)}`, { power: "on" }, "(root)"],
        [
          "a bad node deep in a bulk",
          "POST",
          "/v1/nodes/bulk",
          { nodes: [wholeNode({ uuid: uuid(1) }), wholeNode({ uuid: uuid(2), shard: 7 })] },
          "nodes[1].shard",
        ],
        [
          "a bulk node without its shard",
          "POST",
          "/v1/nodes/bulk",
          {
            nodes: [
              wholeNode({ uuid: uuid(1) }),
              { uuid: uuid(2), name: null, conductor_group: "", instance_host: null },
            ],
          },
          "nodes[1].shard",
        ],
        [
          "a duplicate uuid in a bulk",
          "POST",
          "/v1/nodes/bulk",
          { nodes: [wholeNode({ uuid: uuid(1) }), wholeNode({ uuid: uuid(1).toUpperCase() })] },
          "nodes[1].uuid",
        ],
        [
          "two nodes of one name in a bulk (Ironic's names are unique)",
          "POST",
          "/v1/nodes/bulk",
          {
            nodes: [
              wholeNode({ uuid: uuid(1), name: "bm-1" }),
              wholeNode({ uuid: uuid(2), name: null }),
              wholeNode({ uuid: uuid(3), name: null }),
              wholeNode({ uuid: uuid(4), name: "bm-1" }),
            ],
          },
          "nodes[3].name",
        ],
        ["a limit of 0", "GET", "/v1/nodes?limit=0", undefined, "limit"],
        ["an empty bulk body", "POST", "/v1/nodes/bulk", undefined, "(body)"],
        ["an empty bulk", "POST", "/v1/nodes/bulk", { nodes: [] }, "nodes"],
        ["a bad list filter", "GET", "/v1/nodes?sharded=maybe", undefined, "sharded"],
        ["a bad shard in a list filter", "GET", "/v1/nodes?shard=ok,no%20way", undefined, "shard[1]"],
      ];
      for (const [what, method, path, body, field] of cases) {
        it(what, async () => {
          const answer = await call(`${ctx.base}${path}`, method, body);
          expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
          expect(answer.body.errors.map((e: { field: string }) => e.field)).to.include(field);
          expect(await backend.storedKeys(ctx.store)).to.equal(0);
        });
      }
    });
  });
}
