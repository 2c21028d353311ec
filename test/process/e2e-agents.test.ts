import { expect } from "chai";
import { fileURLToPath } from "node:url";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { postWebhook } from "../helpers/http.js";
import { referenceAgent, startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/**
 * End to end, all real processes: `shardbridge serve` and two `shardbridge agent`s on one
 * shard. kill -9 of the active one: the standby is active within TTL + 1 s. SIGTERM of
 * the active one: it hands the lease back and the (restarted) other takes over within 1 s.
 */
const TTL_MS = 2000;

for (const storeKind of ["memory", "redis"] as const) {
  describe(`End to end: serve and two reference agents (${storeKind} store)`, function () {
    this.timeout(60_000);
    let redis: TestRedisServer | undefined;
    let bridge: BridgeProcess | undefined;
    const agents: AgentProcess[] = [];

    after(async () => {
      await Promise.all(agents.map((p) => p.kill()));
      await bridge?.stop();
      await redis?.stop();
    });

    it("fails over after kill -9 within TTL + 1 s, and hands over on SIGTERM within 1 s", async () => {
      if (storeKind === "redis") redis = await TestRedisServer.start();
      const served = await startBridge({
        shards: [{ name: "rack", lease_ttl_ms: TTL_MS }],
        agents: ["compute-0", "compute-1"],
        ...(redis && { store: redis.url }),
      });
      bridge = served;
      const agent = (id: string) => {
        const p = referenceAgent(id, "rack", served);
        agents.push(p);
        return p;
      };

      const first = agent("compute-0");
      const firstActive = await first.waitFor((e) => e.ev === "active", 15_000);
      await first.waitFor((e) => e.ev === "nodes", 5000);
      const second = agent("compute-1");
      await second.waitFor((e) => e.ev === "standby" && e.holder === "compute-0", 10_000);

      const killedAt = performance.now();
      first.signal("SIGKILL");
      const secondActive = await second.waitFor((e) => e.ev === "active", TTL_MS + 3000);
      const failoverMs = secondActive.seenAt - killedAt;
      console.log(`      failover after kill -9: ${Math.round(failoverMs)} ms (ttl ${TTL_MS} ms)`);
      expect(failoverMs).to.be.below(TTL_MS + 1000);
      expect(secondActive.token).to.be.greaterThan(firstActive.token as number);

      const restarted = agent("compute-0");
      await restarted.waitFor((e) => e.ev === "standby" && e.holder === "compute-1", 10_000);
      const termAt = performance.now();
      second.signal("SIGTERM");
      const handedOver = await restarted.waitFor((e) => e.ev === "active", 5000);
      const handoverMs = handedOver.seenAt - termAt;
      console.log(`      handover after SIGTERM: ${Math.round(handoverMs)} ms`);
      expect(handoverMs).to.be.below(1000);
      await second.exited();
      expect(second.child.exitCode).to.equal(0);
      expect(second.events.some((e) => e.ev === "released")).to.equal(true);

      // A closed terminal (SIGHUP) is a stop too: the lease handed back, not left to expire.
      const third = agent("compute-1");
      await third.waitFor((e) => e.ev === "standby" && e.holder === "compute-0", 10_000);
      const hupAt = performance.now();
      restarted.signal("SIGHUP");
      const afterHup = await third.waitFor((e) => e.ev === "active", 5000);
      console.log(`      handover after SIGHUP: ${Math.round(afterHup.seenAt - hupAt)} ms`);
      expect(afterHup.seenAt - hupAt).to.be.below(1000);
      await restarted.exited();
      expect(restarted.child.exitCode).to.equal(0);
      expect(restarted.events.find((e) => e.ev === "stopping")).to.include({ signal: "SIGHUP" });
      expect(restarted.events.some((e) => e.ev === "released")).to.equal(true);
    });
  });
}

describe("End to end: the Python example agent (standard library only)", function () {
  this.timeout(60_000);
  let bridge: BridgeProcess | undefined;
  let python: AgentProcess | undefined;
  after(async () => {
    await python?.kill();
    await bridge?.stop();
  });

  it("acquires, lists its nodes, and releases on SIGTERM", async () => {
    bridge = await startBridge({ shards: [{ name: "rack", lease_ttl_ms: 1000 }], agents: ["compute-0"] });
    python = AgentProcess.spawnCommand("python-agent", "python3", [
      fileURLToPath(new URL("../../examples/python_agent.py", import.meta.url)),
      ...[
        "--id",
        "compute-0",
        "--shard",
        "rack",
        "--bridge",
        bridge.url,
        "--token",
        bridge.tokenOf("compute-0"),
      ],
    ]);
    const active = await python.waitFor((e) => e.ev === "active", 15_000);
    expect(active.token).to.be.a("number");
    expect((await python.waitFor((e) => e.ev === "nodes", 5000)).count).to.equal(0);
    await new Promise((r) => setTimeout(r, 1500)); // past a TTL: it must be renewing
    expect(python.events.filter((e) => e.ev === "lost")).to.deep.equal([]);
    python.signal("SIGTERM");
    const released = await python.waitFor((e) => e.ev === "released", 5000);
    expect(released.token).to.equal(active.token);
    await python.exited();
    expect(python.child.exitCode).to.equal(0);
  });
});

describe("End to end: serve shuts down gracefully", function () {
  this.timeout(30_000);

  for (const signal of ["SIGTERM", "SIGHUP"] as const)
    it(`exits 0 promptly on ${signal}, saying so, even with an idle keep-alive connection open`, async () => {
      const bridge = await startBridge({ shards: [], agents: ["compute-0"] });
      try {
        expect((await fetch(`${bridge.url}/healthz`)).ok).to.equal(true); // leaves a keep-alive socket
        const termAt = performance.now();
        bridge.serve.signal(signal);
        await bridge.serve.exited();
        expect(performance.now() - termAt).to.be.below(2000);
        // Node's default for SIGHUP was to die at once: status 129, no log line.
        expect(bridge.serve.child.exitCode).to.equal(0);
        expect(bridge.serve.events.find((e) => e.ev === "stopping")).to.include({ signal });
      } finally {
        await bridge.stop();
      }
    });
});

describe("End to end: the reference agent consumes its shard's trait feed", function () {
  this.timeout(60_000);
  let bridge: BridgeProcess | undefined;
  let agent: AgentProcess | undefined;
  after(async () => {
    await agent?.kill();
    await bridge?.stop();
  });

  it("logs each change once, in order, and acknowledges it", async () => {
    bridge = await startBridge({ shards: [{ name: "rack", lease_ttl_ms: 1000 }], agents: ["compute-0"] });
    const admin = new BridgeClient(bridge.url, bridge.tokenFor("admin"));
    const node = "8c0e1d2c-b4a5-4697-8877-665544332211";
    await admin.bulkUpsert([
      { uuid: node, name: null, shard: "rack", conductor_group: "", instance_host: null },
    ]);
    agent = referenceAgent("compute-0", "rack", bridge);
    await agent.waitFor((e) => e.ev === "active", 15_000);
    const inspectorToken = bridge.tokenFor("inspector");
    expect(
      (
        await postWebhook(
          bridge.url,
          { kind: "deltas", node, deltas: ["+CUSTOM_A"] },
          { token: inspectorToken },
        )
      ).status,
    ).to.equal(200);
    const first = await agent.waitFor((e) => e.ev === "traits", 10_000);
    expect(first).to.deep.include({ node, deltas: ["+CUSTOM_A"] });
    await postWebhook(
      bridge.url,
      { kind: "deltas", node, deltas: ["-CUSTOM_A", "+CUSTOM_B"] },
      { token: inspectorToken },
    );
    const second = await agent.waitFor((e) => e.ev === "traits" && e.feed_id !== first.feed_id, 10_000);
    expect(second.deltas).to.deep.equal(["-CUSTOM_A", "+CUSTOM_B"]);
    await new Promise((r) => setTimeout(r, 1500));
    expect(agent.events.filter((e) => e.ev === "traits").length).to.equal(2);
  });
});
