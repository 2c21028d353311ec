import { expect } from "chai";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { bridgeKeeper, type LeaseKeeper } from "../../src/core/keeper/lease-keeper.js";
import { IronicClient } from "../../src/upstream/ironic-client.js";
import { buildRing } from "../../src/core/ring/legacy.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { syncFromIronic } from "../../src/cli/ironic-sync.js";
import { createIronicNode, useIronicPeer } from "../helpers/ironic-peer.js";

const AGENTS = ["compute-a", "compute-b", "compute-c"];

interface PlanJson {
  inventory: {
    source: string;
    fingerprint: string;
    members: string[];
    nodes: Array<{ uuid: string; shard: string | null }>;
  };
  shards: Array<{ name: string; active: string; nodes: string[] }>;
  definitions: Array<{ name: string; lease_ttl_ms: number; agents: string[] }>;
  nova: {
    services: Array<{ shard: string; agent: string; host: string }>;
    old_services: string[];
    moves: Array<{ uuid: string; from: string; to: string }>;
  };
}

/** One answer of GET /v1/agents/{id}/nodes, as the agent asked for it, and when. */
interface Snapshot {
  agent: string;
  at: number;
  via: Map<string, string>;
}

/** An agent as `shardbridge run` would be one: a keeper per planned shard, heartbeats declaring them. */
class TestAgent {
  readonly keepers: LeaseKeeper[] = [];
  private readonly beat: NodeJS.Timeout;
  constructor(
    readonly id: string,
    readonly client: BridgeClient,
    shards: string[],
  ) {
    for (const shard of shards) this.keepers.push(bridgeKeeper(client, shard, id, 200).start());
    const heartbeat = () => void client.heartbeat(id, shards).catch(() => undefined);
    heartbeat();
    this.beat = setInterval(heartbeat, 2000);
  }
  tokens(): number[] {
    return this.keepers.flatMap((k) => (k.token() === null ? [] : [k.token()!]));
  }
  async untilActive(): Promise<void> {
    const deadline = performance.now() + 30_000;
    while (this.tokens().length < this.keepers.length) {
      if (performance.now() > deadline) throw new Error(`${this.id}: not active on all its shards in 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  async stop(): Promise<void> {
    clearInterval(this.beat);
    await Promise.all(this.keepers.map((k) => k.stop()));
  }
}

describe("migrate plan --out, apply, verify: the real Ironic, a real bridge, agents holding the leases", function () {
  this.timeout(900_000);
  const peer = useIronicPeer("the reviewed migration flow");
  let bridge: BridgeProcess;
  let admin: string;
  let dir: string;
  let ironic: IronicClient;
  let planPath: string;
  let plan: PlanJson;
  const created: string[] = [];
  const agents: TestAgent[] = [];

  const bridgeFetch = async (path: string, method = "GET", body?: unknown) => {
    const res = await fetch(`${bridge.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text === "" ? null : JSON.parse(text) };
  };
  const migrate = (...args: string[]) =>
    runShardbridge(["migrate", ...args], { SHARDBRIDGE_TOKEN: admin, SHARDBRIDGE_URL: bridge.url });
  const sync = () =>
    runShardbridge(["ironic-sync", "--ironic", peer.peer.endpoint, "--bridge", bridge.url, "--token", admin]);
  const ironicShards = async () => new Map((await ironic.nodes()).map((n) => [n.uuid, n.shard]));
  const bridgeShards = async () =>
    new Map(
      (await bridgeFetch("/v1/nodes?limit=10000")).body.nodes.map(
        (n: { uuid: string; shard: string | null }) => [n.uuid, n.shard],
      ),
    );
  /** Nothing a refused apply could have written: no key in either store, no definition. */
  const nothingWritten = async () => {
    const [inIronic, inBridge] = [await ironicShards(), await bridgeShards()];
    for (const uuid of created) {
      expect(inIronic.get(uuid), `${uuid} in Ironic`).to.equal(null);
      expect(inBridge.get(uuid), `${uuid} in the bridge`).to.equal(null);
    }
    expect((await bridgeFetch("/v1/shard-definitions")).body.definitions).to.deep.equal([]);
  };

  before(async function () {
    this.timeout(400_000);
    dir = mkdtempSync(join(tmpdir(), "sb-migrate-flow-"));
    planPath = join(dir, "plan.json");
    ironic = new IronicClient(peer.peer.endpoint);
    for (let i = 0; i < 17; i++)
      created.push(await createIronicNode(peer.peer.endpoint, { name: `flow-${i}` }));
    await createIronicNode(peer.peer.endpoint, { name: "flow-sharded", shard: "keep-me" });
    // Rings rebuilt on every request: an agent leaving the pool too early shows at once.
    bridge = await startBridge({
      shards: [],
      agents: [...AGENTS, "compute-x"],
      args: ["--ring-rebuild", "0", "--service-down-time", "3600"],
    });
    admin = bridge.tokenFor("admin");
    const synced = await sync();
    expect(synced.status, synced.stderr).to.equal(0);
    // Two deployed nodes: nova keeps them with their instance's host whatever the ring says.
    for (const uuid of created.slice(0, 2))
      expect(
        (await bridgeFetch(`/v1/nodes/${uuid}`, "PATCH", { instance_host: "compute-b" })).status,
      ).to.equal(200);
    // The legacy nova-computes: in nova's ring pool.
    for (const agent of AGENTS)
      await new BridgeClient(bridge.url, bridge.tokenOf(agent)).heartbeat(agent, []);
  });
  after(async () => {
    for (const agent of agents) await agent.stop();
    await bridge?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("plan --out writes the plan, its fingerprint and definitions, and prints nova's side in nova-manage's order, the old services stopped before apply", async () => {
    const run = await migrate(
      ...["plan", "--bridge", bridge.url, "--agents", AGENTS.join(","), "--max-per-shard", "4"],
      ...["--lease-ttl", "9000", "--out", planPath],
    );
    expect(run.status, run.stderr).to.equal(0);
    plan = JSON.parse(readFileSync(planPath, "utf8"));
    expect(plan.inventory.source).to.equal("bridge");
    expect(plan.inventory.fingerprint).to.match(/^sha256:[0-9a-f]{64}$/);
    expect(plan.inventory.nodes).to.have.length(18);
    expect(plan.shards.flatMap((s) => s.nodes).sort()).to.deep.equal([...created].sort());
    for (const d of plan.definitions) {
      const shard = plan.shards.find((s) => s.name === d.name)!;
      expect(d).to.deep.include({ lease_ttl_ms: 9000, agents: [shard.active] });
    }
    // The deployed nodes go to compute-b's shards, and nova must be told (nova-manage).
    expect(plan.nova.moves.map((m) => m.uuid).sort()).to.deep.equal(created.slice(0, 2).sort());
    for (const move of plan.nova.moves) {
      const shard = plan.shards.find((s) => s.nodes.includes(move.uuid))!;
      expect(move).to.deep.include({ from: "compute-b", to: `${shard.name}-ironic` });
    }
    expect(plan.nova.old_services).to.deep.equal(AGENTS);
    const text = run.stdout;
    const order = [
      "migrate prepare",
      "[DEFAULT] host",
      // The old nova-computes stop before the keys land: left running, they take nodes back.
      "stop the old nova-compute services",
      "compute service set --down compute-a nova-compute",
      "migrate apply",
      `nova-manage db ironic_compute_node_move --ironic-node-uuid ${plan.nova.moves[0]!.uuid} --destination-host ${plan.nova.moves[0]!.to}`,
      "openstack compute service delete",
      "migrate verify",
    ].map((needle) => text.indexOf(needle));
    expect(
      order.every((at) => at >= 0),
      text,
    ).to.equal(true);
    expect([...order].sort((a, b) => a - b)).to.deep.equal(order);
    for (const s of plan.nova.services)
      expect(text).to.match(new RegExp(`${s.shard}\\s+${s.agent}\\s+${s.host}\\s+${s.shard}`));
  });

  it("refuses a bad plan file (exit 2, naming the field), writing nothing", async () => {
    const good = readFileSync(planPath, "utf8");
    const bad: Array<[string, (p: any) => unknown, RegExp]> = [
      ["not JSON", () => "{ nope", /not a plan file/],
      ["a missing field", (p) => ({ ...p, shards: undefined }), /shards: /],
      ["another format", (p) => ({ ...p, format: "v2" }), /format: must be "shardbridge\.migration-plan\/1"/],
      [
        "an edited inventory",
        (p) => ({ ...p, inventory: { ...p.inventory, nodes: p.inventory.nodes.slice(1) } }),
        /inventory\.fingerprint: does not match/,
      ],
      [
        "a definition its agent may not serve",
        (p) => ({
          ...p,
          definitions: p.definitions.map((d: any, i: number) => (i === 0 ? { ...d, agents: ["nobody"] } : d)),
        }),
        /definitions\[0\]\.agents: must include compute-/,
      ],
      [
        "more agents than a definition may allow",
        (p) => ({
          ...p,
          definitions: p.definitions.map((d: any, i: number) =>
            i === 0
              ? { ...d, agents: [...d.agents, ...Array.from({ length: 100 }, (_, n) => `extra-${n}`)] }
              : d,
          ),
        }),
        /definitions\[0\]\.agents: must name at most 100 agents/,
      ],
      [
        "a node planned twice",
        (p) => ({
          ...p,
          shards: p.shards.map((s: any, i: number) =>
            i === 1 ? { ...s, nodes: [...s.nodes, p.shards[0].nodes[0]] } : s,
          ),
        }),
        /shards\[1\]\.nodes\[\d+\]: .* is planned into .* too/,
      ],
    ];
    for (const [what, edit, message] of bad) {
      const file = join(dir, "bad.json");
      const edited = edit(JSON.parse(good));
      writeFileSync(file, typeof edited === "string" ? edited : JSON.stringify(edited));
      const run = await migrate("apply", file, "--ironic", peer.peer.endpoint);
      expect(run.status, `${what}: ${run.stderr}`).to.equal(2);
      expect(run.stderr, what).to.match(message);
    }
    await nothingWritten();
  });

  it("refuses while a planned shard has no holder that is its planned agent, writing nothing", async () => {
    const run = await migrate("apply", planPath, "--ironic", peer.peer.endpoint);
    expect(run.status, run.stdout + run.stderr).to.equal(1);
    expect(run.stderr).to.match(/refused; nothing written/);
    expect(run.stderr).to.match(new RegExp(`${plan.shards[0]!.name}: no live lease; start its agent first`));
    await nothingWritten();
  });

  it("a plan made from Ironic is checked against Ironic: it needs --ironic (exit 2), then refuses without holders", async () => {
    const fromIronic = join(dir, "from-ironic.json");
    const planned = await migrate(
      ...["plan", "--ironic", peer.peer.endpoint, "--agents", AGENTS.join(","), "--max-per-shard", "4"],
      ...["--out", fromIronic],
    );
    expect(planned.status, planned.stderr).to.equal(0);
    const file = JSON.parse(readFileSync(fromIronic, "utf8")) as PlanJson;
    expect(file.inventory.source).to.equal("ironic");
    const bare = await migrate("apply", fromIronic);
    expect(bare.status).to.equal(2);
    expect(bare.stderr).to.match(/the plan was made from Ironic: pass --ironic URL/);
    const run = await migrate("apply", fromIronic, "--ironic", peer.peer.endpoint);
    expect(run.status, run.stdout + run.stderr).to.equal(1);
    // Ironic knows the deployed nodes' instances, not their host: the plan put them where the
    // ring does; the bridge has them with compute-b. Where those differ, apply says so first.
    const ring = buildRing("tooz", AGENTS);
    const strays = created.slice(0, 2).filter((uuid) => ring.memberOf(uuid) !== "compute-b");
    for (const uuid of strays)
      expect(run.stderr).to.match(
        new RegExp(`${uuid}: managed by compute-b now, the plan keeps it with compute-`),
      );
    if (strays.length === 0)
      expect(run.stderr, run.stderr).to.match(
        /planned shards? (is|are) not held by (its|their) planned agent/,
      );
    await nothingWritten();
  });

  it("refuses when a node was added after the plan, naming it, writing nothing", async () => {
    const added = await createIronicNode(peer.peer.endpoint, { name: "flow-late" });
    expect((await sync()).status).to.equal(0);
    try {
      const run = await migrate("apply", planPath, "--ironic", peer.peer.endpoint);
      expect(run.status, run.stdout + run.stderr).to.equal(1);
      expect(run.stderr).to.match(/the inventory \(bridge\) changed since the plan was made: 1 node\n/);
      expect(run.stderr).to.include(`${added} added`);
      await nothingWritten();
    } finally {
      await fetch(`${peer.peer.endpoint}/v1/nodes/${added}`, {
        method: "DELETE",
        headers: { "x-openstack-ironic-api-version": "1.82" },
      });
      expect((await bridgeFetch(`/v1/nodes/${added}`, "DELETE")).status).to.equal(204);
    }
  });

  it("prepare, then apply with agents holding their shards: at no instant is a planned node listed by nobody or by another agent", async () => {
    const prepared = await migrate("prepare", planPath);
    expect(prepared.status, prepared.stderr).to.equal(0);
    const defs = (await bridgeFetch("/v1/shard-definitions")).body.definitions;
    expect(
      defs.map((d: { name: string; filling: boolean }) => `${d.name}:${d.filling}`).sort(),
    ).to.deep.equal(plan.shards.map((s) => `${s.name}:true`).sort());
    for (const id of AGENTS) {
      const shards = plan.shards.filter((s) => s.active === id).map((s) => s.name);
      agents.push(new TestAgent(id, new BridgeClient(bridge.url, bridge.tokenOf(id)), shards));
    }
    for (const agent of agents) await agent.untilActive();

    const plannedOf = new Map(
      AGENTS.map((a) => [a, plan.shards.filter((s) => s.active === a).flatMap((s) => s.nodes)]),
    );
    const snapshots: Snapshot[] = [];
    let polling = true;
    /** when apply returned: each poller stops only once it has an answer to a list it asked for after that */
    let appliedAt = Infinity;
    const poll = async (agent: TestAgent) => {
      for (;;) {
        const askedAt = performance.now();
        const res = await fetch(
          `${bridge.url}/v1/agents/${agent.id}/nodes?token=${agent.tokens().join(",")}`,
          {
            headers: { authorization: `Bearer ${bridge.tokenOf(agent.id)}` },
          },
        );
        const body = (await res.json()) as { nodes: Array<{ uuid: string; via: string }> };
        snapshots.push({
          agent: agent.id,
          at: performance.now(),
          via: new Map(body.nodes.map((n) => [n.uuid, n.via])),
        });
        if (!polling && askedAt >= appliedAt) return;
      }
    };
    const pollers = agents.map(poll);
    // ironic-sync runs over and over beside the apply: it copies Ironic's keys as they land.
    let applying = true;
    const syncs: Array<number | null> = [];
    const syncing = (async () => {
      while (applying) syncs.push((await sync()).status);
    })();
    const started = performance.now();
    const run = await migrate("apply", planPath, "--ironic", peer.peer.endpoint);
    appliedAt = performance.now();
    applying = false;
    await syncing;
    polling = false;
    await Promise.all(pollers);
    expect(run.status, run.stdout + run.stderr).to.equal(0);
    expect(run.stdout).to.include("every node is managed by the agent that managed it before");
    expect(run.stdout).to.match(/verified: 17 nodes in \d+ shards/);

    // Every answer any agent got, before, during and after: its planned nodes all there, no other agent's.
    const problems: string[] = [];
    for (const snap of snapshots)
      for (const [agent, nodes] of plannedOf)
        for (const uuid of nodes) {
          const listed = snap.via.has(uuid);
          if (agent === snap.agent && !listed)
            problems.push(`${snap.agent} at ${Math.round(snap.at - started)} ms: missing ${uuid}`);
          if (agent !== snap.agent && listed)
            problems.push(`${snap.agent} at ${Math.round(snap.at - started)} ms: lists ${agent}'s ${uuid}`);
        }
    expect(problems.slice(0, 10), `${problems.length} problems`).to.deep.equal([]);
    // The polls spanned the switch: each agent was seen with its nodes from the pool, and from its shards.
    const mixed = snapshots.filter(
      (s) => new Set(s.via.values()).size > 1 && [...s.via.values()].includes("lease"),
    );
    for (const id of AGENTS) {
      const mine = snapshots.filter((s) => s.agent === id);
      const vias = (s: Snapshot) => new Set(plannedOf.get(id)!.map((uuid) => s.via.get(uuid)));
      expect(
        mine.some((s) => !vias(s).has("lease")),
        `${id} seen before the switch`,
      ).to.equal(true);
      expect(
        mine.some((s) => vias(s).size === 1 && vias(s).has("lease")),
        `${id} seen after`,
      ).to.equal(true);
    }
    console.log(
      `      ${snapshots.length} node lists read during apply (${mixed.length} mid-switch), ${syncs.length} ironic-syncs beside it (exit ${[...new Set(syncs)].join(",")})`,
    );

    // Ironic's own state and the bridge's: every planned key in both.
    const [inIronic, inBridge] = [await ironicShards(), await bridgeShards()];
    for (const shard of plan.shards)
      for (const uuid of shard.nodes) {
        expect(inIronic.get(uuid), uuid).to.equal(shard.name);
        expect(inBridge.get(uuid), uuid).to.equal(shard.name);
      }
    for (const shard of plan.shards) {
      const info = (await bridgeFetch(`/v1/shards/${shard.name}`)).body;
      expect(info).to.deep.include({
        defined_by: "store",
        filling: false,
        lease_ttl_ms: 9000,
        agents: [shard.active],
      });
    }
    const pool = (await bridgeFetch("/v1/agents")).body.agents.filter(
      (a: { legacy_pool: boolean }) => a.legacy_pool,
    );
    expect(pool, "every agent now serves its shards").to.deep.equal([]);

    const verified = await migrate("verify", planPath, "--ironic", peer.peer.endpoint);
    expect(verified.status, verified.stdout + verified.stderr).to.equal(0);
    expect(verified.stdout).to.match(/ok\s+shard keys in Ironic/);
    // Applying again changes nothing: it says so and verifies.
    const again = await migrate("apply", planPath, "--ironic", peer.peer.endpoint);
    expect(again.status, again.stdout + again.stderr).to.equal(0);
    expect(again.stdout).to.match(/already applied/);
  });

  it("verify fails, naming the shard, once a planned agent no longer holds it", async () => {
    const agent = agents.find((a) => a.id === plan.shards[0]!.active)!;
    await agent.stop();
    agents.splice(agents.indexOf(agent), 1);
    const run = await migrate("verify", planPath, "--ironic", peer.peer.endpoint);
    expect(run.status).to.equal(1);
    expect(run.stdout).to.match(new RegExp(`FAILED  each planned shard held by its planned agent`));
    expect(run.stdout).to.match(new RegExp(`${plan.shards[0]!.name}: no live lease, planned ${agent.id}`));
  });

  it("--force writes the keys of shards nobody holds, says what it risks, and the final check fails (exit 1)", async () => {
    const fresh: string[] = [];
    for (let i = 0; i < 4; i++)
      fresh.push(await createIronicNode(peer.peer.endpoint, { name: `force-${i}` }));
    expect((await sync()).status).to.equal(0);
    await new BridgeClient(bridge.url, bridge.tokenOf("compute-x")).heartbeat("compute-x", []);
    const forcePlan = join(dir, "force.json");
    const planned = await migrate(
      ...["plan", "--bridge", bridge.url, "--agents", "compute-x", "--out", forcePlan],
    );
    expect(planned.status, planned.stderr).to.equal(0);
    const refused = await migrate("apply", forcePlan, "--ironic", peer.peer.endpoint);
    expect(refused.status).to.equal(1);
    expect(refused.stderr).to.match(/1 planned shard is not held by its planned agent:/);
    const forced = await migrate("apply", forcePlan, "--ironic", peer.peer.endpoint, "--force");
    expect(forced.status, forced.stdout + forced.stderr).to.equal(1);
    expect(forced.stdout).to.match(/--force: 1 planned shard is not held by its planned agent \(4 nodes\)/);
    expect(forced.stdout).to.match(/FAILED: 4 nodes are not managed by the agent that managed them before/);
    for (const uuid of fresh) expect(forced.stdout).to.include(`${uuid}: compute-x -> nobody`);
    const [inIronic, inBridge] = [await ironicShards(), await bridgeShards()];
    for (const uuid of fresh) {
      expect(inIronic.get(uuid)).to.equal("ring-compute-x-1");
      expect(inBridge.get(uuid)).to.equal("ring-compute-x-1");
    }
  });
  it("ironic-sync writes nothing when the shard definitions changed while it read Ironic (apply's barrier)", async () => {
    const node = await createIronicNode(peer.peer.endpoint, { name: "race-0" });
    expect((await sync()).status).to.equal(0);
    const client = new BridgeClient(bridge.url, admin, 30_000);
    const racing = syncFromIronic(client, async () => {
      const read = await ironic.nodes(); // race-0 unsharded, as read
      // Meanwhile migrate apply writes its key to Ironic, its definitions barrier, the bridge.
      await ironic.setShard(node, "race-shard");
      await client.defineShard("race-barrier", {});
      await client.patchNode(node, { shard: "race-shard" });
      return read;
    });
    let refused: Error | undefined;
    await racing.catch((error: Error) => (refused = error));
    expect(refused?.message).to.match(
      /shard definitions changed while this sync read Ironic.*0 of \d+ nodes written/,
    );
    // The older key it read (none) was not put back over the bridge's.
    expect((await bridgeShards()).get(node)).to.equal("race-shard");
    // Run again, it copies what Ironic holds now.
    expect((await syncFromIronic(client, () => ironic.nodes())).nodes).to.be.greaterThan(0);
    expect((await bridgeShards()).get(node)).to.equal("race-shard");
  });
});
