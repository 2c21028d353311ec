import { expect } from "chai";
import fc from "fast-check";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bridgeApp } from "../helpers/app.js";
import { ShardName } from "../../src/core/names.js";
import { IronicClient } from "../../src/upstream/ironic-client.js";
import { randomUuid, seededRandom } from "../../src/runtime/random.js";
import { compareEvents } from "../../src/core/ring/compare.js";
import { buildRing } from "../../src/core/ring/legacy.js";
import {
  currentAgentOf,
  inventoryChanges,
  inventoryEntry,
  inventoryFingerprint,
  planShards,
  type MigrationPlan,
  type PlanNode,
} from "../../src/core/ring/plan.js";
import { planFile, readPlanFile, type PlanFile } from "../../src/tools/migrate/plan-file.js";
import { planText, stepsText } from "../../src/tools/migrate/text.js";
import { applyPlan, writeDefinitions } from "../../src/tools/migrate/apply.js";
import { ConfigError } from "../../src/runtime/config.js";
import { ToozRing } from "../../src/core/ring/tooz.js";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { bridgeKeeper, type LeaseKeeper } from "../../src/core/keeper/lease-keeper.js";
import { backendsUnderTest, memoryUnderTest, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";
import { createIronicNode, useIronicPeer } from "../helpers/ironic-peer.js";
import { runShardbridge } from "../helpers/cli.js";

function fleet(
  seed: number,
  count: number,
  extra: (i: number) => Partial<PlanNode> = () => ({}),
): PlanNode[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, (_, i) => ({
    uuid: randomUuid(random),
    shard: null,
    instance_host: null,
    ...extra(i),
  }));
}

const AGENTS = Array.from({ length: 10 }, (_, i) => `compute-${i}`);

describe("Migration plan and comparison (pure)", () => {
  it("shards the unsharded nodes so that no node changes agent, within the size cap, each node once", () => {
    const nodes = fleet(1, 3000, (i) =>
      i < 100 ? { shard: "existing-1" } : i < 130 ? { instance_host: "compute-7" } : {},
    );
    const ring = buildRing("tooz", AGENTS);
    const plan = planShards(nodes, ring, { maxPerShard: 120 });
    expect(plan.alreadySharded).to.equal(100);
    expect(plan.unplaced).to.deep.equal([]);
    const seen = new Set<string>();
    const byUuid = new Map(nodes.map((n) => [n.uuid, n]));
    for (const shard of plan.shards) {
      expect(ShardName.safeParse(shard.name).success, shard.name).to.equal(true);
      expect(shard.name).to.not.equal("existing-1");
      expect(shard.nodes.length).to.be.within(1, 120);
      for (const uuid of shard.nodes) {
        expect(seen.has(uuid)).to.equal(false);
        seen.add(uuid);
        expect(currentAgentOf(byUuid.get(uuid)!, ring)).to.equal(shard.active);
      }
    }
    expect(seen.size).to.equal(2900);
    // Near-equal parts per agent: sizes differ by at most one.
    for (const agent of AGENTS) {
      const sizes = plan.shards.filter((s) => s.active === agent).map((s) => s.nodes.length);
      expect(Math.max(...sizes) - Math.min(...sizes)).to.be.at.most(1);
    }
  });

  it("holds for any fleet, agent set and cap (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 31 }),
        fc.integer({ min: 1, max: 400 }),
        fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9 ._-]{0,12}$/), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 60 }),
        (seed, count, agents, maxPerShard) => {
          const nodes = fleet(seed, count);
          const ring = buildRing("tooz", agents);
          const plan = planShards(nodes, ring, { maxPerShard });
          const names = new Set(plan.shards.map((s) => s.name));
          expect(names.size).to.equal(plan.shards.length);
          let planned = 0;
          for (const s of plan.shards) {
            expect(ShardName.safeParse(s.name).success, s.name).to.equal(true);
            expect(s.nodes.length).to.be.within(1, maxPerShard);
            planned += s.nodes.length;
            for (const uuid of s.nodes) expect(ring.memberOf(uuid)).to.equal(s.active);
          }
          expect(planned).to.equal(count);
        },
      ),
      { numRuns: 150, seed: 42 },
    );
  });

  it("never proposes a name equal but for case to a shard that exists (one shard to nova and Ironic)", () => {
    const nodes = fleet(7, 12, () => ({}));
    const ring = buildRing("tooz", ["compute-a"]);
    const plain = planShards(nodes, ring, { maxPerShard: 100 });
    expect(plain.shards.map((s) => s.name)).to.deep.equal(["ring-compute-a-1"]);
    const beside = planShards(nodes, ring, { maxPerShard: 100, taken: ["RING-COMPUTE-A-1"] });
    expect(beside.shards.map((s) => s.name)).to.deep.equal(["ring-compute-a-2"]);
  });

  it("leaves a node whose instance host is unknown unplanned, saying why", () => {
    const nodes = fleet(2, 5, (i) => (i === 0 ? { has_instance: true } : {}));
    const plan = planShards(nodes, buildRing("tooz", ["a"]));
    expect(plan.unplaced).to.have.length(1);
    expect(plan.unplaced[0]!.reason).to.match(/instance whose host is unknown/);
  });

  it("compares: the ring scatters a lost agent's nodes and brings them back; shards hand them whole to one standby", () => {
    const nodes = fleet(3, 2000, (i) => (i < 20 ? { instance_host: "compute-3" } : {}));
    const result = compareEvents(nodes, AGENTS, { standbys: 1 });
    const ring = new ToozRing(AGENTS);
    const without3 = new ToozRing(AGENTS.filter((a) => a !== "compute-3"));
    const lost = result.events.find((e) => e.event === "lost" && e.agent === "compute-3")!;
    const owned = nodes.filter((n) => (n.instance_host ?? ring.memberOf(n.uuid)) === "compute-3");
    expect(lost.ring.moved + lost.ring.unmanaged).to.equal(owned.length);
    expect(lost.ring.unmanaged).to.equal(20); // deployed nodes stay with their (lost) host
    // tooz's ignore is the same as a ring rebuilt without the member
    for (const m of lost.ring.moves.filter((x) => x.to !== null))
      expect(m.to).to.equal(without3.memberOf(m.uuid));
    expect(lost.ring.agentsGaining).to.be.greaterThan(3);
    expect(lost.shards).to.include({ moved: owned.length, agentsGaining: 1, unmanaged: 0 });
    const back = result.events.find((e) => e.event === "back" && e.agent === "compute-3")!;
    expect(back.ring.moved).to.equal(lost.ring.moved);
    expect(back.shards.moved).to.equal(0);
    const added = result.events.find((e) => e.event === "added")!;
    const grown = new ToozRing([...AGENTS, "new-agent"]);
    expect(added.ring.moved).to.equal(
      nodes.filter((n) => n.instance_host === null && grown.memberOf(n.uuid) === "new-agent").length,
    );
    expect(added.shards.moved).to.equal(0);
    // Without standbys a lost active's nodes are left unmanaged.
    const bare = compareEvents(nodes, AGENTS, { standbys: 0, only: ["compute-3"] });
    expect(bare.events[0]!.shards).to.include({ moved: 0, unmanaged: owned.length });
  });
});

describe("Migration plan file: fingerprint, changes, nova's side (pure)", () => {
  const nodes = fleet(31, 40, (i) =>
    i < 3 ? { instance_host: "Compute-B" } : i === 3 ? { shard: "kept" } : {},
  );
  const ring = buildRing("tooz", ["compute-a", "compute-b"]);
  const plan = planShards(nodes, ring, { maxPerShard: 10 });
  const file = planFile(
    plan,
    nodes,
    { source: "bridge", from: "http://bridge", ring: "tooz", members: ["compute-a", "compute-b"] },
    { maxPerShard: 10, leaseTtlMs: 8000, now: new Date(0) },
  );
  const planned = new Map(plan.shards.flatMap((s) => s.nodes.map((u) => [u, s.name] as const)));
  const entries = nodes.map(inventoryEntry);

  it("fingerprints the inventory and the ring, whatever the order nodes were read in", () => {
    const ringOf = { kind: "tooz", members: ["compute-a", "compute-b"] };
    expect(inventoryFingerprint([...entries].reverse(), ringOf)).to.equal(file.inventory.fingerprint);
    expect(inventoryFingerprint(entries, { ...ringOf, members: ["COMPUTE-B", "compute-a"] })).to.equal(
      file.inventory.fingerprint,
    );
    expect(inventoryFingerprint(entries, { ...ringOf, members: ["compute-a"] })).to.not.equal(
      file.inventory.fingerprint,
    );
    const moved = entries.map((e, i) =>
      i === 5 ? { ...e, instance_host: "compute-a", has_instance: true } : e,
    );
    expect(inventoryFingerprint(moved, ringOf)).to.not.equal(file.inventory.fingerprint);
  });

  it("names what changed since the plan; a node already in its planned shard is not a change (resume)", () => {
    const uuid = (i: number) => entries[i]!.uuid;
    const now = entries
      .filter((_, i) => i !== 7)
      .map((e, i) =>
        e.uuid === uuid(9)
          ? { ...e, shard: planned.get(e.uuid)! } // applied already
          : e.uuid === uuid(10)
            ? { ...e, shard: "elsewhere" }
            : i === 0
              ? { ...e, instance_host: "compute-a" }
              : e,
      );
    now.push({
      uuid: "ffffffff-ffff-4fff-8fff-ffffffffffff",
      shard: null,
      instance_host: null,
      has_instance: false,
    });
    const changes = inventoryChanges(file.inventory.nodes, now, planned);
    const by = new Map(changes.map((c) => [c.uuid, c]));
    expect(changes).to.have.length(4);
    expect(by.get(uuid(7))).to.include({ change: "removed" });
    expect(by.get(uuid(10))).to.include({ change: "changed", detail: "shard: null -> elsewhere" });
    expect(by.get(uuid(0))!.detail).to.equal("instance_host: Compute-B -> compute-a");
    expect(by.get("ffffffff-ffff-4fff-8fff-ffffffffffff")).to.include({ change: "added" });
    expect(by.has(uuid(9))).to.equal(false);
  });

  it("gives nova's side: one service per shard (host SHARD-ironic), the old services, a move per deployed node", () => {
    expect(file.nova.services).to.deep.equal(
      plan.shards.map((s) => ({ shard: s.name, agent: s.active, host: `${s.name}-ironic` })),
    );
    expect(file.nova.old_services).to.deep.equal(["compute-a", "compute-b"]);
    expect(file.nova.moves.map((m) => m.uuid).sort()).to.deep.equal(
      nodes
        .slice(0, 3)
        .map((n) => n.uuid)
        .sort(),
    );
    for (const move of file.nova.moves) {
      expect(move.from).to.equal("Compute-B");
      expect(move.to).to.equal(`${planned.get(move.uuid)}-ironic`);
    }
    expect(file.definitions.every((d) => d.lease_ttl_ms === 8000 && d.agents.length === 1)).to.equal(true);
  });

  it("says one of a thing in the singular, and a step with nothing to do as such (a plan of one node)", () => {
    const planOf = (nodes: PlanNode[]) => {
      const one = planShards(nodes, buildRing("tooz", ["compute-a"]), { maxPerShard: 10 });
      const members = { source: "bridge" as const, from: "http://bridge", ring: "tooz" as const };
      return {
        plan: one,
        file: planFile(
          one,
          nodes,
          { ...members, members: ["compute-a"] },
          { maxPerShard: 10, leaseTtlMs: 6000 },
        ),
      };
    };
    const { plan: idle, file: idleFile } = planOf(fleet(5, 1));
    expect(idleFile.definitions[0]!.description).to.equal(
      "planned by shardbridge migrate from nova's ring: 1 node of compute-a",
    );
    expect(planText(idle, 10)).to.include(
      "\n1 unsharded node into 1 shard of at most 10; no node changes agent. " +
        "0 nodes already have a shard key and are left alone.\n",
    );
    const steps = stepsText(idleFile, "plan.json").trimEnd().split("\n");
    expect(steps).to.include(
      "6. no planned node has an instance: nova moves every node itself, none by hand",
    );
    // No step is a heading with nothing under it: a line ending in ":" is followed by an indented one.
    steps.forEach((line, i) => {
      if (/^\d\. .*:$/.test(line)) expect(steps[i + 1], line).to.match(/^ {5}\S/);
    });
    const { file: deployedFile } = planOf(fleet(5, 1, () => ({ instance_host: "compute-a" })));
    const deployed = stepsText(deployedFile, "plan.json").split("\n");
    const move = deployed.findIndex((l) => l.startsWith("6. "));
    expect(deployed[move]).to.equal(
      "6. move the 1 node with an instance to its shard's service (nova moves the others itself):",
    );
    expect(deployed[move + 1]).to.match(/^ {5}nova-manage db ironic_compute_node_move --ironic-node-uuid /);
  });

  it("reads its own file back, and refuses edits that break its promises as bad input, naming the field", () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-plan-file-"));
    try {
      const write = (content: unknown) => {
        const path = join(dir, "plan.json");
        writeFileSync(path, JSON.stringify(content));
        return path;
      };
      expect(readPlanFile(write(file))).to.deep.equal(file);
      const refused: Array<[unknown, RegExp]> = [
        [
          { ...file, shards: [...file.shards, { ...file.shards[0]!, name: "x" }] },
          /shards\[\d+\]\.nodes\[0\]: .* too/,
        ],
        [
          { ...file, shards: file.shards.map((s, i) => (i === 0 ? { ...s, name: "kept" } : s)) },
          /shards\[0\]\.name: kept is a shard the inventory has/,
        ],
        // Equal but for case: one shard to nova and Ironic's database.
        [
          { ...file, shards: file.shards.map((s, i) => (i === 0 ? { ...s, name: "KEPT" } : s)) },
          /shards\[0\]\.name: KEPT is a shard the inventory has already \(kept\)/,
        ],
        [
          {
            ...file,
            shards: file.shards.map((s, i) =>
              i === 1 ? { ...s, name: file.shards[0]!.name.toUpperCase() } : s,
            ),
          },
          new RegExp(`shards\\[1\\]\\.name: repeats ${file.shards[0]!.name}`),
        ],
        [{ ...file, definitions: file.definitions.slice(1) }, /shards\[0\]\.name: .* has no definition/],
        [
          { ...file, definitions: [...file.definitions, { ...file.definitions[0]!, name: "extra" }] },
          /definitions\[\d+\]\.name: extra is no planned shard/,
        ],
        [
          { ...file, inventory: { ...file.inventory, members: [] } },
          /inventory\.members: must name at least one member/,
        ],
        [
          {
            ...file,
            definitions: [{ ...file.definitions[0]!, lease_ttl_ms: 10 }, ...file.definitions.slice(1)],
          },
          /definitions\[0\]\.lease_ttl_ms: must be at least 1000/,
        ],
      ];
      for (const [content, message] of refused) {
        const attempt = () => readPlanFile(write(content));
        expect(attempt).to.throw(ConfigError, message);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("shardbridge compare and migrate plan (commands)", function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "sb-migrate-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("compare --json reports every event with the nodes it moves", async () => {
    const run = await runShardbridge(["compare", "--generate", "500", "--agents", "a,b,c,d", "--json"]);
    expect(run.status, run.stderr).to.equal(0);
    const result = JSON.parse(run.stdout);
    expect(result.events.map((e: { event: string; agent: string }) => `${e.event} ${e.agent}`)).to.deep.equal(
      ["lost a", "back a", "lost b", "back b", "lost c", "back c", "lost d", "back d", "added new-agent"],
    );
    const lostA = result.events[0];
    expect(lostA.ring.moves).to.have.length(lostA.ring.moved + lostA.ring.unmanaged);
    expect(lostA.ring.moves[0]).to.have.keys(["uuid", "from", "to"]);
    const table = await runShardbridge([
      "compare",
      "--generate",
      "500",
      "--agents",
      "a,b,c,d",
      "--agent",
      "b",
    ]);
    expect(table.stdout).to.match(/lost b\s+\d+\s+\d+\s+0\s+\|/);
    expect(table.stdout).to.not.match(/^lost a /m);
  });

  const bad: Array<[string, string[], RegExp]> = [
    ["no agents", ["compare", "--generate", "5", "--agents", ""], /agents: must name at least one member/],
    [
      "an agent twice",
      ["compare", "--generate", "5", "--agents", "a,B,b"],
      /agents\[2\]: repeats \[1\] \(hosts compare lower-cased/,
    ],
    [
      "adding an agent that exists",
      ["compare", "--generate", "5", "--agents", "a,b", "--add", "A"],
      /--add: A is already/,
    ],
    [
      "two inventories",
      ["migrate", "plan", "--generate", "5", "--ironic", "http://x", "--agents", "a"],
      /name one inventory/,
    ],
    [
      "a zero shard cap",
      ["migrate", "plan", "--generate", "5", "--agents", "a", "--max-per-shard", "0"],
      /--max-per-shard: must be an integer/,
    ],
    [
      "--apply with nowhere to write",
      ["migrate", "plan", "--generate", "5", "--agents", "a", "--apply"],
      /plan from --bridge or --ironic/,
    ],
  ];
  for (const [name, args, message] of bad) {
    it(`refuses ${name}, saying so`, async () => {
      const run = await runShardbridge(args);
      expect(run.status, "bad usage").to.equal(2);
      expect(run.stderr).to.match(message);
    });
  }

  it("refuses an inventory file with a non-UUID key, naming the node", async () => {
    const file = join(dir, "bad.json");
    writeFileSync(
      file,
      JSON.stringify({ nodes: [{ uuid: randomUuid(seededRandom(1)) }, { uuid: "node-2" }] }),
    );
    const run = await runShardbridge(["migrate", "plan", "--inventory", file, "--agents", "a"]);
    expect(run.status).to.equal(1);
    expect(run.stderr).to.match(/nodes\[1\]\.uuid: must be a UUID/);
  });

  it("says there is nothing to migrate when every node has a shard key, and prints no steps", async () => {
    const file = join(dir, "sharded.json");
    writeFileSync(file, JSON.stringify({ nodes: [{ uuid: randomUuid(seededRandom(2)), shard: "rack-a" }] }));
    const run = await runShardbridge(["migrate", "plan", "--inventory", file, "--agents", "a"]);
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout).to.equal("Nothing to migrate: no unsharded node (1 node already has a shard key).\n");
  });
});

describe("migrate plan --apply to a bridge: switching from the ring to shards moves no node", function () {
  this.timeout(120_000);
  const ctx = useApp(memoryUnderTest(), (store) =>
    bridgeApp(store, { authority: testAuthority(), legacy: { rebuildMs: 0 } }),
  );
  const legacyAgents = ["compute-a", "compute-b", "compute-9"];
  const as = (agent: string) => TEST_TOKENS.agent(agent);

  it("every agent manages the same nodes before (ring) and after (its new shards' leases)", async () => {
    const nodes = fleet(8, 300, (i) => (i < 10 ? { instance_host: "compute-b" } : {}));
    await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes: nodes.map(wholeNode) });
    for (const agent of legacyAgents)
      await call(`${ctx.base}/v1/agents/${agent}/heartbeat`, "POST", { shards: [] }, as(agent));
    const listOf = async (agent: string, tokens?: number[]) => {
      const query = tokens === undefined ? "" : `?token=${tokens.join(",")}`;
      const res = await call(`${ctx.base}/v1/agents/${agent}/nodes${query}`, "GET", undefined, as(agent));
      expect(res.status).to.equal(200);
      return new Set<string>(res.body.nodes.map((n: { uuid: string }) => n.uuid));
    };
    const before = new Map<string, Set<string>>();
    for (const agent of legacyAgents) before.set(agent, await listOf(agent, []));

    const run = await runShardbridge(
      [
        ...["migrate", "plan", "--bridge", ctx.base, "--agents", legacyAgents.join(",")],
        ...["--max-per-shard", "40", "--apply", "--json"],
      ],
      { SHARDBRIDGE_TOKEN: TEST_TOKENS.admin },
    );
    expect(run.status, run.stderr).to.equal(0);
    const plan = JSON.parse(run.stdout) as {
      shards: Array<{ name: string; active: string; nodes: string[] }>;
      applied: { written: number };
    };
    expect(plan.applied.written).to.equal(300);
    expect((await call(`${ctx.base}/v1/nodes?sharded=false`, "GET")).body.nodes).to.deep.equal([]);

    // Each agent now serves its planned shards: it says so and takes their leases.
    for (const agent of legacyAgents) {
      const mine = plan.shards.filter((s) => s.active === agent).map((s) => s.name);
      await call(`${ctx.base}/v1/agents/${agent}/heartbeat`, "POST", { shards: mine }, as(agent));
      const tokens: number[] = [];
      for (const shard of mine) {
        const lease = await call(`${ctx.base}/v1/shards/${shard}/lease`, "POST", { agent }, as(agent));
        expect(lease.status, JSON.stringify(lease.body)).to.equal(200);
        tokens.push(lease.body.token);
      }
      expect(await listOf(agent, tokens), agent).to.deep.equal(before.get(agent));
    }
    // The instance_host survives the rewrite.
    const pinned = (await call(`${ctx.base}/v1/nodes/${nodes[0]!.uuid}`, "GET")).body;
    expect(pinned.instance_host).to.equal("compute-b");
  });
});

describe("migrate plan --apply to the real Ironic API (PATCH shard, API 1.82)", function () {
  this.timeout(400_000);
  const peer = useIronicPeer("Ironic migration test");

  it("writes each planned shard key to Ironic; each shard's nodes are its active agent's under nova's ring", async () => {
    const created: string[] = [];
    for (let i = 0; i < 7; i++)
      created.push(await createIronicNode(peer.peer.endpoint, { name: `mig-${i}` }));
    const already = await createIronicNode(peer.peer.endpoint, { name: "mig-sharded", shard: "keep-me" });
    const run = await runShardbridge([
      ...["migrate", "plan", "--ironic", peer.peer.endpoint, "--agents", "Compute-A,compute-b,compute-c"],
      ...["--max-per-shard", "2", "--apply", "--json"],
    ]);
    expect(run.status, run.stderr).to.equal(0);
    const plan = JSON.parse(run.stdout) as {
      shards: Array<{ name: string; active: string; nodes: string[] }>;
      alreadySharded: number;
      applied: { written: number; failed: string[] };
    };
    expect(plan.applied).to.deep.equal({ written: 7, failed: [] });
    const nodes = new Map((await new IronicClient(peer.peer.endpoint).nodes()).map((n) => [n.uuid, n]));
    const ring = buildRing("tooz", ["compute-a", "compute-b", "compute-c"]);
    for (const shard of plan.shards) {
      expect(shard.nodes.length).to.be.at.most(2);
      for (const uuid of shard.nodes) {
        expect(nodes.get(uuid)!.shard).to.equal(shard.name);
        expect(ring.memberOf(uuid)).to.equal(shard.active);
      }
    }
    for (const uuid of created) expect(nodes.get(uuid)!.shard).to.match(/^ring-compute-[abc]-\d+$/);
    expect(nodes.get(already)!.shard).to.equal("keep-me");
  });
});

for (const backend of backendsUnderTest())
  describe(`The switch from nova's ring to shards, checked at every instant (node by node): ${backend.name}`, function () {
    this.timeout(120_000);
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, { authority: testAuthority(), legacy: { rebuildMs: 0 } }),
    );
    const agents = ["compute-a", "compute-b", "compute-9"];
    const as = (agent: string) => TEST_TOKENS.agent(agent);

    /** Each agent's keepers, one per planned shard, renewing as an agent does. */
    const keepers = new Map<string, LeaseKeeper[]>();
    afterEach(async () => {
      await Promise.all([...keepers.values()].flat().map((k) => k.stop()));
      keepers.clear();
    });
    const tokensOf = (agent: string) =>
      (keepers.get(agent) ?? []).flatMap((k) => (k.token() === null ? [] : [k.token()!]));

    /** Every agent's list as it asks for it (its own token, the tokens it holds). */
    const listsNow = async () => {
      const lists = new Map<string, Set<string>>();
      for (const agent of agents) {
        const res = await call(
          `${ctx.base}/v1/agents/${agent}/nodes?token=${tokensOf(agent).join(",")}`,
          "GET",
          undefined,
          as(agent),
        );
        expect(res.status).to.equal(200);
        lists.set(agent, new Set(res.body.nodes.map((n: { uuid: string }) => n.uuid)));
      }
      return lists;
    };
    /** What is wrong at this instant: a planned node not listed by its agent, or listed by another. */
    const violations = (lists: Map<string, Set<string>>, plan: MigrationPlan) =>
      plan.shards.flatMap((shard) =>
        shard.nodes.flatMap((uuid) => {
          const by = agents.filter((a) => lists.get(a)!.has(uuid));
          return by.length === 1 && by[0] === shard.active ? [] : [`${uuid}: ${by.join("+") || "nobody"}`];
        }),
      );

    /** The fleet planned, its shards defined (`filling` or not), each held and declared by its agent. */
    async function setUp(filling: boolean): Promise<MigrationPlan> {
      const nodes = fleet(21, 90, (i) => (i < 6 ? { instance_host: "compute-b" } : {}));
      await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes: nodes.map(wholeNode) });
      const plan = planShards(nodes, buildRing("tooz", agents), { maxPerShard: 12 });
      for (const shard of plan.shards) {
        const put = await call(`${ctx.base}/v1/shard-definitions/${shard.name}`, "PUT", {
          agents: [shard.active],
          filling,
        });
        expect(put.status).to.equal(201);
      }
      // Each agent takes its planned shards' leases and declares them: they carry no nodes yet.
      for (const agent of agents) {
        const mine = plan.shards.filter((s) => s.active === agent).map((s) => s.name);
        await call(`${ctx.base}/v1/agents/${agent}/heartbeat`, "POST", { shards: mine }, as(agent));
        const client = new BridgeClient(ctx.base, as(agent));
        keepers.set(
          agent,
          mine.map((shard) => bridgeKeeper(client, shard, agent, 100).start()),
        );
      }
      const deadline = performance.now() + 30_000;
      while (agents.some((a) => tokensOf(a).length < keepers.get(a)!.length)) {
        expect(performance.now(), "every keeper active within 30 s").to.be.below(deadline);
        await new Promise((r) => setTimeout(r, 50));
      }
      return plan;
    }

    it("with the planned shards marked filling, every planned node is listed by exactly its agent after every single write", async () => {
      const plan = await setUp(true);
      // The trap of issue 15: holding a planned shard's lease must not take the agent out of the pool.
      expect(violations(await listsNow(), plan)).to.deep.equal([]);
      let instants = 0;
      // Node by node, interleaving agents, as a concurrent ironic-sync might copy them.
      const moves = plan.shards.flatMap((s) => s.nodes.map((uuid, i) => ({ uuid, shard: s.name, i })));
      moves.sort((a, b) => a.i - b.i || (a.uuid < b.uuid ? -1 : 1));
      for (const { uuid, shard } of moves) {
        expect((await call(`${ctx.base}/v1/nodes/${uuid}`, "PATCH", { shard })).status).to.equal(200);
        expect(violations(await listsNow(), plan), `after ${uuid} -> ${shard}`).to.deep.equal([]);
        instants++;
      }
      for (const shard of plan.shards) {
        await call(`${ctx.base}/v1/shard-definitions/${shard.name}`, "PUT", { agents: [shard.active] });
        expect(violations(await listsNow(), plan), `after ${shard.name} stopped filling`).to.deep.equal([]);
        instants++;
      }
      expect(instants).to.equal(90 + plan.shards.length);
      const pool = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents.filter(
        (a: { legacy_pool: boolean }) => a.legacy_pool,
      );
      expect(pool, "every agent serves its shards now").to.deep.equal([]);
    });

    it("without the filling mark the first write takes the agent out: the check catches its other nodes", async () => {
      const plan = await setUp(false);
      expect(violations(await listsNow(), plan), "empty shards keep their holders in the pool").to.deep.equal(
        [],
      );
      const first = plan.shards.find((s) => s.active === "compute-a")!;
      await call(`${ctx.base}/v1/nodes/${first.nodes[0]}`, "PATCH", { shard: first.name });
      const wrong = violations(await listsNow(), plan);
      // Every other node of compute-a's ring share: now in the others' rings (rebuilt at once here).
      const ringShare =
        plan.shards.filter((s) => s.active === "compute-a").flatMap((s) => s.nodes).length - 1;
      expect(wrong.length, wrong.join("\n")).to.equal(ringShare);
      expect(wrong.some((w) => /: compute-(b|9)$/.test(w))).to.equal(true);
    });
  });

describe("migrate apply resumes a run that stopped half way (a bridge, no Ironic)", function () {
  this.timeout(120_000);
  const ctx = useApp(memoryUnderTest(), (store) =>
    bridgeApp(store, { authority: testAuthority(), legacy: { rebuildMs: 0 } }),
  );
  const agents = ["compute-a", "compute-b"];
  const keepers: LeaseKeeper[] = [];
  afterEach(async () => {
    await Promise.all(keepers.splice(0).map((k) => k.stop()));
  });

  /** The fleet in the bridge, planned, prepared, each planned shard held by its agent. */
  async function prepared(): Promise<{ file: PlanFile; bridge: BridgeClient; lines: string[] }> {
    const nodes = fleet(41, 30);
    await call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes: nodes.map(wholeNode) });
    for (const agent of agents)
      await call(
        `${ctx.base}/v1/agents/${agent}/heartbeat`,
        "POST",
        { shards: [] },
        TEST_TOKENS.agent(agent),
      );
    const plan = planShards(nodes, buildRing("tooz", agents), { maxPerShard: 8 });
    const file = planFile(
      plan,
      nodes,
      { source: "bridge", from: ctx.base, ring: "tooz", members: agents },
      { maxPerShard: 8, leaseTtlMs: 6000 },
    );
    const bridge = new BridgeClient(ctx.base, TEST_TOKENS.admin, 30_000);
    await writeDefinitions({ plan: file, bridge }, true);
    for (const shard of plan.shards) {
      const client = new BridgeClient(ctx.base, TEST_TOKENS.agent(shard.active));
      keepers.push(bridgeKeeper(client, shard.name, shard.active, 100).start());
    }
    while (keepers.some((k) => k.token() === null)) await new Promise((r) => setTimeout(r, 50));
    return { file, bridge, lines: [] };
  }
  const apply = (file: PlanFile, bridge: BridgeClient, lines: string[]) =>
    applyPlan({
      plan: file,
      bridge,
      ironic: null,
      force: false,
      say: (l) => lines.push(l),
      sleep: async () => {},
    });

  it("with some keys written and the shards filling, it writes the rest and ends verified", async () => {
    const { file, bridge, lines } = await prepared();
    const half = file.shards.flatMap((s) => s.nodes.slice(0, 2).map((uuid) => [uuid, s.name] as const));
    for (const [uuid, shard] of half) await bridge.patchNode(uuid, { shard });
    expect(await apply(file, bridge, lines), lines.join("\n")).to.equal(true);
    expect(lines).to.include(`bridge: ${30 - half.length} shard keys written`);
    expect(lines.join("\n")).to.match(/every node is managed by the agent that managed it before/);
  });

  it("with every key written and the shards still filling, it only clears them and verifies", async () => {
    const { file, bridge, lines } = await prepared();
    for (const shard of file.shards)
      for (const uuid of shard.nodes) await bridge.patchNode(uuid, { shard: shard.name });
    const version = (await bridge.shardDefinitions()).version;
    expect(await apply(file, bridge, lines), lines.join("\n")).to.equal(true);
    expect(lines[0]).to.match(/has its shard key already/);
    // One write per definition, filling cleared: never marked filling again.
    const after = await bridge.shardDefinitions();
    expect(after.definitions.every((d) => !d.filling)).to.equal(true);
    expect(lines.some((l) => /marked filling/.test(l))).to.equal(false);
    expect(after.version).to.be.greaterThan(version);
    const again: string[] = [];
    expect(await apply(file, bridge, again)).to.equal(true);
    expect(again[0]).to.match(/already applied/);
  });
});
