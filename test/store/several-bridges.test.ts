import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { exampleInspector } from "../helpers/examples.js";
import { call, listen, postWebhook, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { TestRedisServer } from "../helpers/redis-server.js";

const NODE = "33333333-3333-4333-8333-333333333333";

type Bridge = { url: string; close: () => Promise<void> };

/**
 * Two bridges on one fresh redis-server: two apps, each with its own store connection,
 * as two `serve` processes would have, with `options` beside the common ones.
 */
async function twoBridges(
  options: Partial<Parameters<typeof bridgeApp>[1]> = {},
): Promise<{ bridges: Bridge[]; stop: () => Promise<void> }> {
  const server = await TestRedisServer.start();
  const catalog = new ShardCatalog([{ name: "rack", lease_ttl_ms: 1000 }] as never);
  const stores: Store[] = [];
  const bridges: Bridge[] = [];
  for (let i = 0; i < 2; i++) {
    const store = await openStore(server.url);
    stores.push(store);
    bridges.push(
      await listen(
        bridgeApp(store, { authority: testAuthority(), catalog, inspector: exampleInspector(), ...options }),
      ),
    );
  }
  return {
    bridges,
    async stop() {
      for (const b of bridges) await b.close();
      for (const s of stores) await s.close();
      await server.stop();
    },
  };
}

/**
 * Two bridges on one redis-server (two apps, each with its own store connection, as two
 * `serve` processes would have) answer as one: a webhook delivery repeated to the other
 * bridge is answered once, and an agent's feed cursor moves the same whichever bridge it
 * reads and acknowledges through.
 */
describe("Several bridges on one Redis behave as one", function () {
  this.timeout(30_000);
  let bridges: Bridge[] = [];
  let stop: () => Promise<void> = async () => undefined;

  before(async () => {
    ({ bridges, stop } = await twoBridges());
    const put = await call(`${bridges[0]!.url}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack" }));
    expect(put.status).to.be.oneOf([200, 201]);
  });
  after(() => stop());

  const traitsVia = async (i: number) =>
    (await call(`${bridges[i]!.url}/v1/nodes/${NODE}/traits`, "GET")).body as {
      traits: string[];
      generation: number;
    };

  it("a webhook delivery repeated to the other bridge is answered with the first answer, applied once", async () => {
    const payload = { kind: "deltas", node: NODE, deltas: ["+CUSTOM_SEEN_ONCE"] };
    const first = await postWebhook(bridges[0]!.url, payload, { delivery: "shared-1" });
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    const generation = (await traitsVia(1)).generation;
    const again = await postWebhook(bridges[1]!.url, payload, { delivery: "shared-1" });
    expect(again).to.deep.equal({ ...first, replay: true });
    expect((await traitsVia(0)).generation, "applied once").to.equal(generation);
  });

  it("the feed cursor is one: read and acknowledged through one bridge, the other goes on after it", async () => {
    const agent = (i: number) => new BridgeClient(bridges[i]!.url, TEST_TOKENS.agent("compute-0"));
    const token = await acquireWhenReady(agent(0), "rack", "compute-0");
    const before = await agent(0).readFeed("rack", token);
    if (before.entries.length > 0) await agent(0).ackFeed("rack", token, before.entries.at(-1)!.id);
    await postWebhook(
      bridges[1]!.url,
      { kind: "deltas", node: NODE, deltas: ["+CUSTOM_VIA_B"] },
      { delivery: "shared-2" },
    );
    const viaB = await agent(1).readFeed("rack", token);
    expect(viaB.entries.map((e) => e.deltas)).to.deep.equal([["+CUSTOM_VIA_B"]]);
    await agent(1).ackFeed("rack", token, viaB.entries[0]!.id);
    expect(
      (await agent(0).readFeed("rack", token)).entries,
      "nothing new through the first bridge",
    ).to.deep.equal([]);
  });
});

/**
 * nova's legacy hash ring across bridges: each bridge reads the pool's membership at
 * most once per rebuild period (like nova's periodic task), so two bridges may answer
 * from snapshots of different ages — but one rebuild period after a change, every answer
 * of every bridge reflects it, and they place every unsharded node on the same agent.
 */
describe("Several bridges on one Redis: the legacy ring's membership", function () {
  this.timeout(60_000);
  const REBUILD_MS = 2000;
  const SERVICE_DOWN_MS = 2000;
  const POOL = ["compute-0", "compute-1", "compute-a"];
  const JOINER = "compute-b";
  const NODES = Array.from(
    { length: 60 },
    (_, i) => `5a1e${i.toString(16).padStart(4, "0")}-0000-4000-8000-000000000000`,
  );
  let bridges: Bridge[] = [];
  let stop: () => Promise<void> = async () => undefined;
  /** agents that keep heartbeating with no shard (nova-computes without [ironic] shard) */
  const alive = new Set<string>();
  let beating: NodeJS.Timeout | undefined;

  const heartbeat = (agent: string) =>
    call(`${bridges[0]!.url}/v1/agents/${agent}/heartbeat`, "POST", { shards: [] }).then((r) => {
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    });

  before(async () => {
    ({ bridges, stop } = await twoBridges({
      legacy: { rebuildMs: REBUILD_MS, serviceDownMs: SERVICE_DOWN_MS },
    }));
    const nodes = NODES.map((uuid) => ({ uuid, ...wholeNode({}) }));
    expect((await call(`${bridges[1]!.url}/v1/nodes/bulk`, "POST", { nodes })).status).to.equal(200);
    for (const agent of POOL) alive.add(agent);
    await Promise.all(POOL.map(heartbeat));
    beating = setInterval(() => void Promise.all([...alive].map(heartbeat)), 400);
  });
  after(async () => {
    clearInterval(beating);
    await stop();
  });

  /**
   * What bridge `i` answers every agent of `agents` (as admin): the ring's members (each
   * answer must name the same), when the snapshot was built, and which agent each
   * unsharded node went to ("via":"ring").
   */
  async function view(i: number, agents: string[]) {
    const members = new Set<string>();
    const builtAt = new Set<string>();
    const placed = new Map<string, string>();
    for (const agent of agents) {
      const answer = await call(`${bridges[i]!.url}/v1/agents/${agent}/nodes`, "GET");
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      const { legacy, nodes } = answer.body as {
        legacy: { pool_member: boolean; members: string[]; built_at: string };
        nodes: Array<{ uuid: string; via: string }>;
      };
      expect(legacy.pool_member, `${agent} in the pool`).to.equal(true);
      members.add(legacy.members.join(","));
      builtAt.add(legacy.built_at);
      for (const node of nodes.filter((n) => n.via === "ring")) {
        expect(placed.get(node.uuid), `${node.uuid} placed twice by bridge ${i}`).to.equal(undefined);
        placed.set(node.uuid, agent);
      }
    }
    expect([...members], `bridge ${i}: one membership in all its answers`).to.have.length(1);
    return { members: [...members][0]!.split(","), builtAtMs: Date.parse([...builtAt].sort()[0]!), placed };
  }

  /** Both bridges: the same members, and every unsharded node on the same agent. */
  async function bothAgree(agents: string[]) {
    const [first, second] = [await view(0, agents), await view(1, agents)];
    expect(second.members, "the same membership on both bridges").to.deep.equal(first.members);
    expect(first.placed.size, "every unsharded node placed").to.equal(NODES.length);
    expect([...second.placed].sort(), "the same placement on both bridges").to.deep.equal(
      [...first.placed].sort(),
    );
    return first;
  }

  it("an agent that joins is in both bridges' ring one rebuild period later, one that dies is out; both place every node alike", async () => {
    const before = await bothAgree(POOL);
    expect(before.members).to.deep.equal([...POOL].sort());

    // compute-b joins. A bridge whose snapshot is younger than a rebuild period still
    // answers without it (as a nova-compute would until its periodic task); one period
    // later every answer of every bridge has it.
    const joinedAt = Date.now();
    await heartbeat(JOINER);
    alive.add(JOINER);
    const stale = await view(0, POOL);
    if (Date.now() - before.builtAtMs < REBUILD_MS)
      expect(stale.members, "a snapshot younger than a rebuild period is kept").to.not.include(JOINER);
    await sleep(REBUILD_MS + 50);
    const joined = await bothAgree([...POOL, JOINER]);
    expect(joined.members).to.deep.equal([...POOL, JOINER].sort());
    expect(joined.builtAtMs, "built after the join").to.be.at.least(joinedAt);
    const moved = [...joined.placed].filter(([uuid, agent]) => before.placed.get(uuid) !== agent);
    expect(moved.length, "nodes moved to the newcomer").to.be.greaterThan(0);
    expect(
      moved.every(([, agent]) => agent === JOINER),
      "only to the newcomer (a hash ring)",
    ).to.equal(true);

    // compute-a stops heartbeating: down after service_down_time, out of every bridge's
    // ring one rebuild period after that.
    alive.delete("compute-a");
    const lastBeatAt = Date.now();
    await sleep(SERVICE_DOWN_MS + REBUILD_MS + 500);
    const remaining = ["compute-0", "compute-1", JOINER];
    const left = await bothAgree(remaining);
    expect(left.members).to.deep.equal([...remaining].sort());
    expect(left.builtAtMs).to.be.at.least(lastBeatAt + SERVICE_DOWN_MS);
  });
});
