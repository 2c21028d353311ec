import { expect } from "chai";
import { setFlagsFromString } from "node:v8";
import type { BareMetalNode } from "../../src/core/node.js";
import { decodeNode, encodeNode } from "../../src/store/node-record.js";
import type { NodeSource } from "../../src/store/ports/nodes.js";
import { RedisNodes } from "../../src/store/redis/nodes.js";
import { randomUuid, seededRandom } from "../../src/runtime/random.js";
import { keyLayout } from "../../src/store/redis/keys.js";
import { openStore } from "../../src/store/open.js";
import { backendsUnderTest, useBackend } from "../helpers/backends.js";
import { TestRedisServer } from "../helpers/redis-server.js";

const SHARDS = ["rack-a", "rack-b", "rack-c"];
const HOSTS = ["compute-a", "Compute-A", "compute-b"];

// V8's own answer to "do these two objects share a hidden class" (a runtime function,
// callable once the flag is on, from code compiled after it).
setFlagsFromString("--allow-natives-syntax");
const haveSameMap = new Function("a", "b", "return %HaveSameMap(a, b)") as (
  a: unknown,
  b: unknown,
) => boolean;

/** What each source must list, from the nodes themselves: the reference the indexes are held to. */
function expected(nodes: Map<string, BareMetalNode>, source: NodeSource): string[] {
  const all = [...nodes.values()];
  const chosen =
    source.kind === "all"
      ? all
      : source.kind === "sharded"
        ? all.filter((n) => n.shard !== null)
        : source.kind === "free"
          ? all.filter((n) => n.shard === null && n.instance_host === null)
          : source.kind === "instance"
            ? all.filter(
                (n) => n.shard === null && n.instance_host?.toLowerCase() === source.host.toLowerCase(),
              )
            : all.filter((n) => source.places.includes(n.shard));
  return chosen.map((n) => n.uuid).sort();
}

const SOURCES: NodeSource[] = [
  { kind: "all" },
  { kind: "sharded" },
  { kind: "free" },
  { kind: "instance", host: "COMPUTE-a" },
  { kind: "instance", host: "compute-b" },
  // Asking for places' versions beside the page leaves the page as it is.
  { kind: "instance", host: "compute-a", versionsOf: ["rack-a", null, "no-such-shard"] },
  { kind: "places", places: [null] },
  { kind: "places", places: ["rack-a"] },
  { kind: "places", places: ["rack-b", null, "rack-c"] },
];

for (const backend of backendsUnderTest()) {
  describe(`Node indexes: ${backend.name}`, function () {
    this.timeout(60_000);
    const ctx = useBackend(backend);

    it("lists every source in uuid order, page by page, exactly as the nodes say, through random changes", async () => {
      const random = seededRandom(7);
      const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
      const nodes = new Map<string, BareMetalNode>();
      const uuids = Array.from({ length: 600 }, () => randomUuid(random));
      for (let round = 0; round < 4; round++) {
        // A round of changes: new nodes, moves between shards and the pool, hosts set and
        // cleared, deletions.
        const batch: BareMetalNode[] = [];
        for (const uuid of uuids) {
          if (random() < 0.5) continue;
          batch.push({
            uuid,
            name: random() < 0.5 ? null : `n-${uuid.slice(0, 4)}`,
            shard: random() < 0.4 ? null : pick(SHARDS),
            conductor_group: random() < 0.8 ? "" : "g1",
            instance_host: random() < 0.5 ? null : pick(HOSTS),
          });
        }
        const version = await ctx.store.nodes.poolVersion();
        await ctx.store.nodes.backend.upsert(batch);
        for (const node of batch) nodes.set(node.uuid, node);
        for (const uuid of uuids.filter(() => random() < 0.05)) {
          expect(await ctx.store.nodes.backend.delete(uuid)).to.equal(nodes.delete(uuid));
        }
        expect(await ctx.store.nodes.poolVersion(), "the pool changed").to.not.equal(version);
        for (const source of SOURCES) {
          for (const pageSize of [1, 7, 1000]) {
            const listed: string[] = [];
            for await (const page of ctx.store.nodes.pages(source, pageSize)) {
              expect(page.length).to.be.at.most(pageSize);
              for (const node of page) expect(node).to.deep.equal(nodes.get(node.uuid));
              listed.push(...page.map((n) => n.uuid));
            }
            expect(listed, `${JSON.stringify(source)} in pages of ${pageSize}`).to.deep.equal(
              expected(nodes, source),
            );
          }
        }
        // The places' versions read with an instance listing's first page are the versions.
        const places = [...SHARDS, null, "no-such-shard"];
        const instance = ctx.store.nodes.instanceNodes("Compute-A", places);
        const first = await instance.first;
        expect(first.versions).to.deep.equal(await ctx.store.nodes.placeVersions(places));
        expect(first.versions.slice(0, SHARDS.length + 1).every((v) => v > 0)).to.equal(true);
        const listed: string[] = [];
        let pages = 0;
        for await (const page of instance.pages) {
          listed.push(...page.map((n) => n.uuid));
          pages++;
        }
        expect(listed).to.deep.equal(expected(nodes, { kind: "instance", host: "compute-a" }));
        // Whole in one page here (fewer nodes than a page): said so.
        expect(first.whole).to.equal(pages <= 1 && listed.length < ctx.store.nodes.backend.listPage);
        const counts = new Map((await ctx.store.nodes.counts()).map((c) => [c.shard, c.count]));
        for (const place of [null, ...SHARDS])
          expect(counts.get(place) ?? 0).to.equal(
            [...nodes.values()].filter((n) => n.shard === place).length,
          );
      }
    });

    it("GET-style pages are full until the end, whatever the store's per-call budget", async () => {
      const random = seededRandom(3);
      const batch = Array.from({ length: 4500 }, () => ({
        uuid: randomUuid(random),
        name: null,
        shard: null,
        conductor_group: "",
        instance_host: null,
      }));
      await ctx.store.nodes.backend.upsert(batch);
      const first = await ctx.store.nodes.list({ sharded: "false", limit: "4000" });
      expect(first.nodes).to.have.length(4000);
      const rest = await ctx.store.nodes.list({ sharded: "false", limit: "4000", marker: first.next });
      expect(rest.nodes).to.have.length(500);
      expect(rest.next).to.equal(null);
      expect([...first.nodes, ...rest.nodes].map((n) => n.uuid)).to.deep.equal(
        batch.map((n) => n.uuid).sort(),
      );
    });

    it("does not change the pool version when only sharded nodes change", async () => {
      const node = {
        uuid: randomUuid(seededRandom(9)),
        name: null,
        shard: "rack-a",
        conductor_group: "",
        instance_host: "h",
      };
      await ctx.store.nodes.backend.upsert([node]);
      const version = await ctx.store.nodes.poolVersion();
      await ctx.store.nodes.backend.upsert([
        { ...node, name: "renamed", shard: "rack-b", instance_host: null },
      ]);
      expect(await ctx.store.nodes.poolVersion()).to.equal(version);
      await ctx.store.nodes.backend.upsert([{ ...node, shard: null }]);
      expect(await ctx.store.nodes.poolVersion()).to.not.equal(version);
    });

    it("a node sent again as it is changes no version; renamed in place, it stays in its indexes", async () => {
      const random = seededRandom(11);
      const pooled = {
        uuid: randomUuid(random),
        name: "a",
        shard: null,
        conductor_group: "",
        instance_host: "Compute-A",
      };
      const sharded = {
        uuid: randomUuid(random),
        name: "b",
        shard: "rack-a",
        conductor_group: "",
        instance_host: null,
      };
      await ctx.store.nodes.backend.upsert([pooled, sharded]);
      const places: Array<string | null> = [null, "rack-a"];
      const versions = async () => [
        await ctx.store.nodes.poolVersion(),
        ...(await ctx.store.nodes.placeVersions(places)),
      ];
      const before = await versions();
      const stored = await ctx.store.nodes.backend.get(pooled.uuid);
      expect(await ctx.store.nodes.backend.upsert([{ ...pooled }, { ...sharded }])).to.deep.equal([
        { created: false, shard: null },
        { created: false, shard: "rack-a" },
      ]);
      expect(await versions(), "nothing changed").to.deep.equal(before);
      // The embedded store hands out the node it keeps: sent again unchanged, it keeps it
      // (no new copy for the GC). Redis decodes a new object on every read.
      if (backend.name === "memory")
        expect(await ctx.store.nodes.backend.get(pooled.uuid), "the same object").to.equal(stored);
      // Renamed, the host's case changed: the same indexes, new values, the places' versions move.
      const renamed = [
        { ...pooled, name: "a2", instance_host: "compute-a" },
        { ...sharded, name: "b2", conductor_group: "g1" },
      ];
      await ctx.store.nodes.backend.upsert(renamed);
      const after = await versions();
      expect(after[0], "the pool's membership is the same").to.equal(before[0]);
      expect(after[1]).to.not.equal(before[1]);
      expect(after[2]).to.not.equal(before[2]);
      const nodes = new Map(renamed.map((n) => [n.uuid, n]));
      for (const source of SOURCES) {
        const listed: BareMetalNode[] = [];
        for await (const page of ctx.store.nodes.pages(source)) listed.push(...page);
        expect(
          listed.map((n) => n.uuid),
          JSON.stringify(source),
        ).to.deep.equal(expected(nodes, source));
        for (const node of listed) expect(node).to.deep.equal(nodes.get(node.uuid));
      }
    });

    it("keeps every node on one hidden class, whatever shape it arrived in", async () => {
      // A spread copy of each node gave each a class of its own in the embedded store: a
      // map and a descriptor array per node, 23 MB of a 100,000-node bridge's 68 MB heap.
      const random = seededRandom(11);
      const arrived: BareMetalNode[] = [];
      for (let i = 0; i < 600; i++) {
        const fields = {
          uuid: randomUuid(random),
          name: i % 3 === 0 ? null : `n-${i}`,
          shard: i % 2 === 0 ? null : SHARDS[i % SHARDS.length]!,
          conductor_group: "",
          instance_host: i % 5 === 0 ? HOSTS[i % HOSTS.length]! : null,
        };
        // as the bulk decoder, a PUT ({ ...parsed, uuid }) and a client's body with its
        // fields in another order hand them over
        const { uuid, name, shard, conductor_group, instance_host } = fields;
        arrived.push(
          i % 3 === 0
            ? decodeNode(uuid, encodeNode(fields))
            : i % 3 === 1
              ? { ...fields, uuid }
              : { instance_host, conductor_group, shard, name, uuid },
        );
      }
      await ctx.store.nodes.backend.upsert(arrived);
      const kept = await ctx.store.nodes.backend.getMany(arrived.map((n) => n.uuid));
      const listed: BareMetalNode[] = [];
      for await (const page of ctx.store.nodes.pages({ kind: "all" }, 250)) listed.push(...page);
      for (const node of [...kept, ...listed])
        expect(haveSameMap(node, kept[0]), `${JSON.stringify(node)}: a hidden class of its own`).to.equal(
          true,
        );
      expect(listed).to.have.length(600);
    });
  });
}

describe("Node registry: a Redis written by a bridge before the indexed layout", function () {
  this.timeout(30_000);

  it("moves its nodes into the indexed layout at connect, counts and all, and drops the old keys", async () => {
    const server = await TestRedisServer.start();
    const admin = server.client();
    const old = keyLayout().nodes.legacy;
    const random = seededRandom(5);
    const nodes = Array.from({ length: 2500 }, (_, i) => ({
      uuid: randomUuid(random),
      name: i % 3 === 0 ? null : `node-${i}`,
      shard: i % 4 === 0 ? null : `rack-${i % 3}`,
      conductor_group: "",
      instance_host: i % 4 === 0 && i % 8 === 0 ? "compute-a" : null,
    }));
    try {
      // The old layout, as nodes-upsert.lua wrote it: a JSON hash, a place hash, a set per place.
      const pipeline = admin.pipeline();
      for (const node of nodes) {
        const place = node.shard ?? "";
        pipeline.hset(old.data, node.uuid, JSON.stringify({ ...node }));
        pipeline.hset(old.place, node.uuid, place);
        pipeline.sadd(place === "" ? old.unsharded : old.members(place), node.uuid);
        pipeline.hincrby(old.counts, place, 1);
      }
      await pipeline.exec();
      const store = await openStore(server.url);
      try {
        const listed: BareMetalNode[] = [];
        for await (const page of store.nodes.pages({ kind: "all" })) listed.push(...page);
        expect(listed).to.deep.equal([...nodes].sort((a, b) => (a.uuid < b.uuid ? -1 : 1)));
        const free = [];
        for await (const page of store.nodes.pages({ kind: "free" })) free.push(...page);
        expect(free).to.have.length(nodes.filter((n) => n.shard === null && n.instance_host === null).length);
        const counts = Object.fromEntries((await store.nodes.counts()).map((c) => [c.shard ?? "", c.count]));
        const want: Record<string, number> = {};
        for (const node of nodes) want[node.shard ?? ""] = (want[node.shard ?? ""] ?? 0) + 1;
        expect(counts).to.deep.equal(want);
        expect(
          await admin.exists(old.data, old.place, old.counts, old.unsharded, old.members("rack-1")),
        ).to.equal(0);
        // A second connect finds nothing to move.
        expect(await (store.nodes.backend as RedisNodes).migrate()).to.equal(0);
      } finally {
        await store.close();
      }
    } finally {
      admin.disconnect();
      await server.stop();
    }
  });

  it("moves trait records kept in one key per node into buckets at connect", async () => {
    const server = await TestRedisServer.start();
    const admin = server.client();
    const traits = keyLayout().traits;
    const uuid = randomUuid(seededRandom(8));
    const record = { holders: { CUSTOM_A: "inspector" }, generation: 3, lastOrder: { inspector: 17 } };
    try {
      await admin.hset(traits.legacyRecord(uuid), "generation", "3", "record", JSON.stringify(record));
      const store = await openStore(server.url);
      try {
        expect(await store.traits.read(uuid)).to.deep.equal(record);
        expect(await admin.exists(traits.legacyRecord(uuid))).to.equal(0);
        // The next commit compares against the migrated generation.
        expect(await store.traits.commit(uuid, 2, { ...record, generation: 4 })).to.equal(false);
        expect(await store.traits.commit(uuid, 3, { ...record, generation: 4 })).to.equal(true);
      } finally {
        await store.close();
      }
    } finally {
      admin.disconnect();
      await server.stop();
    }
  });
});
