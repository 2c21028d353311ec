import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import type { BareMetalNode } from "../../src/core/node.js";
import { randomUuid, seededRandom } from "../../src/runtime/random.js";
import {
  legacyNodesOf,
  legacyPoolMembers,
  servesNoShard,
  shardInService,
} from "../../src/core/ring/membership.js";
import { LegacyPool } from "../../src/core/ring/pool.js";
import { buildRing } from "../../src/core/ring/legacy.js";
import { novaRing } from "../../src/core/ring/tooz.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";

const node = (uuid: string, extra: Partial<BareMetalNode> = {}): BareMetalNode => ({
  uuid,
  name: null,
  shard: null,
  conductor_group: "",
  instance_host: null,
  ...extra,
});

describe("Legacy pool: nova's membership rules (pure)", () => {
  it("holds agents that are up and serve no shard, lower-cased; not the down, the sharded or lease holders", () => {
    const inService = (shard: string) => shard === "rack-1" || shard === "rack-2";
    const members = legacyPoolMembers(
      [
        { agent: "Compute-A", ageMs: 5_000, serves: [] },
        { agent: "compute-b", ageMs: 60_000, serves: [] }, // exactly service_down_time: still up (nova: <=)
        { agent: "compute-c", ageMs: 60_001, serves: [] },
        { agent: "compute-d", ageMs: 1_000, serves: ["rack-1"] },
        { agent: "compute-e", ageMs: 1_000, serves: [] },
      ],
      new Map([["compute-e", ["rack-2"]]]),
      inService,
    );
    expect(members).to.deep.equal(["compute-a", "compute-b"]);
  });

  it("lets a shard take its agent out only once it carries nodes and is no longer filling", () => {
    // The trap of the switch: a lease taken before the shard keys land must not empty the agent's list.
    expect(shardInService(0, false), "no nodes yet").to.equal(false);
    expect(shardInService(17, true), "still being filled by migrate apply").to.equal(false);
    expect(shardInService(17, false)).to.equal(true);
    const counts = new Map([
      ["planned", 0],
      ["filling", 12],
      ["live", 5],
    ]);
    const filling = new Set(["filling"]);
    const inService = (shard: string) => shardInService(counts.get(shard) ?? 0, filling.has(shard));
    const agents = [
      { agent: "holds-planned", ageMs: 0, serves: ["planned"] },
      { agent: "holds-filling", ageMs: 0, serves: ["filling"] },
      { agent: "declares-live", ageMs: 0, serves: ["live", "planned"] },
      { agent: "holds-live", ageMs: 0, serves: [] },
    ];
    const held = new Map([
      ["holds-planned", ["planned"]],
      ["holds-filling", ["filling"]],
      ["holds-live", ["filling", "live"]],
    ]);
    expect(legacyPoolMembers(agents, held, inService)).to.deep.equal(["holds-filling", "holds-planned"]);
    expect(servesNoShard(["planned"], ["filling"], inService)).to.equal(true);
    expect(servesNoShard([], ["live"], inService)).to.equal(false);
    expect(servesNoShard(undefined, [], inService)).to.equal(true);
  });

  it("keeps a node with an instance on the instance's host, whatever the ring says", () => {
    const random = seededRandom(5);
    const ring = buildRing("tooz", ["compute-a", "compute-b"]);
    const free = Array.from({ length: 200 }, () => node(randomUuid(random)));
    const deployed = free.slice(0, 50).map((n) => ({ ...n, instance_host: "Compute-C" }));
    const nodes = [...deployed, ...free.slice(50)];
    const a = legacyNodesOf("compute-a", nodes, ring);
    const c = legacyNodesOf("compute-c", nodes, null); // not in the pool: only its instances
    expect(c.map((x) => x.reason)).to.deep.equal(Array(50).fill("instance"));
    expect(a.every((x) => x.reason === "ring" && ring.memberOf(x.node.uuid) === "compute-a")).to.equal(true);
    const b = legacyNodesOf("compute-b", nodes, ring);
    expect(a.length + b.length + c.length).to.equal(200);
  });

  it("reads membership once per rebuild period, not on every request", async () => {
    let now = 1_000_000;
    let members = ["compute-a"];
    let reads = 0;
    const pool = new LegacyPool(
      async () => {
        reads++;
        return members;
      },
      { rebuildMs: 60_000, nowMs: () => now },
    );
    expect((await pool.ringFor("compute-a")).ring.members).to.deep.equal(["compute-a"]);
    members = ["compute-a", "compute-b"];
    now += 59_999;
    expect((await pool.ringFor("compute-a")).ring.members).to.deep.equal(["compute-a"]);
    // The asking agent is always in its own ring, as nova adds CONF.host.
    expect((await pool.ringFor("Compute-Z")).ring.members).to.deep.equal(["compute-a", "compute-z"]);
    expect(reads).to.equal(1);
    now += 1;
    expect((await pool.ringFor("compute-a")).ring.members).to.deep.equal(["compute-a", "compute-b"]);
    expect(reads).to.equal(2);
  });
});

for (const backend of backendsUnderTest()) {
  describe(`Mixed mode over HTTP (shards and nova's ring): ${backend.name}`, () => {
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, { authority: testAuthority(), legacy: { rebuildMs: 0 } }),
    );
    const as = (agent: string) => TEST_TOKENS.agent(agent);
    const random = seededRandom(11);
    const uuids = Array.from({ length: 240 }, () => randomUuid(random));
    const nodes = uuids.map((uuid, i) =>
      wholeNode({
        uuid,
        shard: i < 20 ? "rack-a" : i < 40 ? "rack-b" : null,
        // A few deployed nodes: their instance lives on compute-a or on the sharded compute-0.
        instance_host: i >= 40 && i < 50 ? "compute-a" : i >= 50 && i < 55 ? "compute-0" : null,
      }),
    );

    const heartbeat = (agent: string, shards: string[]) =>
      call(`${ctx.base}/v1/agents/${agent}/heartbeat`, "POST", { shards }, as(agent));
    const nodesOf = (agent: string, tokens: number[] = []) =>
      call(
        `${ctx.base}/v1/agents/${agent}/nodes${tokens.length === 0 ? "" : `?token=${tokens.join(",")}`}`,
        "GET",
        undefined,
        tokens.length === 0 ? TEST_TOKENS.admin : as(agent),
      );

    beforeEach(async () => {
      expect((await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes })).status).to.equal(200);
    });

    it("gives every node to exactly one agent: shards by lease, instances to their host, the rest by nova's ring", async () => {
      await heartbeat("compute-0", ["rack-a"]);
      await heartbeat("compute-1", ["rack-b"]);
      for (const legacy of ["compute-a", "compute-b", "compute-9"]) await heartbeat(legacy, []);
      const a = await call(
        `${ctx.base}/v1/shards/rack-a/lease`,
        "POST",
        { agent: "compute-0" },
        as("compute-0"),
      );
      const b = await call(
        `${ctx.base}/v1/shards/rack-b/lease`,
        "POST",
        { agent: "compute-1" },
        as("compute-1"),
      );

      const lists = {
        "compute-0": (await nodesOf("compute-0", [a.body.token])).body,
        "compute-1": (await nodesOf("compute-1", [b.body.token])).body,
        "compute-a": (await nodesOf("compute-a")).body,
        "compute-b": (await nodesOf("compute-b")).body,
        "compute-9": (await nodesOf("compute-9")).body,
      };
      const owner = new Map<string, string>();
      for (const [agent, list] of Object.entries(lists)) {
        for (const n of list.nodes) {
          expect(owner.has(n.uuid), `${n.uuid} listed by ${owner.get(n.uuid)} and ${agent}`).to.equal(false);
          owner.set(n.uuid, agent);
        }
      }
      expect(owner.size).to.equal(nodes.length);

      const ring = novaRing(["compute-a", "compute-b", "compute-9"]);
      for (const n of nodes) {
        const expected =
          n.shard === "rack-a"
            ? "compute-0"
            : n.shard === "rack-b"
              ? "compute-1"
              : (n.instance_host ?? ring.memberOf(n.uuid));
        expect(owner.get(n.uuid), n.uuid).to.equal(expected);
      }
      expect(lists["compute-a"].legacy).to.include({ pool_member: true, ring: "tooz" });
      expect(lists["compute-a"].legacy.members).to.deep.equal(["compute-9", "compute-a", "compute-b"]);
      expect(lists["compute-0"].legacy.pool_member).to.equal(false);
      const via = (agent: keyof typeof lists) =>
        new Set(lists[agent].nodes.map((n: { via: string }) => n.via));
      expect(via("compute-0")).to.deep.equal(new Set(["lease", "instance"]));
      expect(
        lists["compute-0"].nodes.filter((n: { token: number | null }) => n.token === null),
      ).to.have.length(5);
      expect(via("compute-b")).to.deep.equal(new Set(["ring"]));

      const listing = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents;
      const pool = listing
        .filter((x: { legacy_pool: boolean }) => x.legacy_pool)
        .map((x: { id: string }) => x.id);
      expect(pool).to.deep.equal(["compute-9", "compute-a", "compute-b"]);
    });

    it("shows nova's split-brain: an agent the others count as down still claims its share", async () => {
      await heartbeat("compute-a", []);
      await heartbeat("compute-b", []);
      const before = (await nodesOf("compute-b")).body.nodes.length;
      // compute-9 never heartbeated: the others' ring does not hold it, but its own does.
      const zombie = (await nodesOf("compute-9")).body.nodes.filter((n: { via: string }) => n.via === "ring");
      const others = new Set(
        [...(await nodesOf("compute-a")).body.nodes, ...(await nodesOf("compute-b")).body.nodes].map(
          (n: { uuid: string }) => n.uuid,
        ),
      );
      expect(zombie.length).to.be.greaterThan(0);
      expect(zombie.every((n: { uuid: string }) => others.has(n.uuid))).to.equal(true);
      expect(before).to.be.greaterThan(0);
    });

    it("refuses a heartbeat with a bad shard list, naming it, and records nothing", async () => {
      const bad = await call(
        `${ctx.base}/v1/agents/compute-a/heartbeat`,
        "POST",
        { shards: ["a b"] },
        as("compute-a"),
      );
      expect(bad.status).to.equal(400);
      expect(bad.body.errors[0].field).to.equal("shards[0]");
      const extra = await call(
        `${ctx.base}/v1/agents/compute-a/heartbeat`,
        "POST",
        { shard: "x" },
        as("compute-a"),
      );
      expect(extra.status).to.equal(400);
      expect((await call(`${ctx.base}/v1/agents`, "GET")).body.agents).to.deep.equal([]);
    });
  });
}
