import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { UNDEFINED_MAX_WAIT_MS } from "../../src/agent/undefined-shard.js";
import { DEFINITIONS_REFRESH_MS } from "../../src/bridge/shards/stored-definitions.js";
import { AgentProcess, type AgentEvent } from "../helpers/agent-process.js";
import { referenceAgent, startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { running } from "../helpers/processes.js";
import { until } from "../helpers/until.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { lives, runFixture, watchChildren } from "../helpers/run-records.js";

const TTL_MS = 2000;
const SHARD = "rack-l";
const HOSTS = ["compute-0", "compute-1"];
/** What the bridge logs, once, when it finds the store came back without its shard definitions. */
const EMPTIED = "store came back empty: its shard definitions are not those this bridge read before";
/**
 * A store that starts empty grants no lease for one TTL, by its own clock (a Redis's
 * uptime in whole seconds: up to 1 s more, see boot_us in clock-server.lua). The bounds
 * below add the bridges' look at the store (DEFINITIONS_REFRESH_MS) and 1 s for the
 * standbys' requests to land.
 */
const STORE_HOLD_MS = TTL_MS + 1000;

/** A counter's value in a bridge's /metrics (0 when absent). */
async function metric(bridge: BridgeProcess, series: string): Promise<number> {
  const text = await (await fetch(`${bridge.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const logged = (process: AgentProcess, message: string) => process.events.filter((e) => e.ev === message);

/** The first of `processes` to log an event `match` takes after their `from` events: it and the event. */
function firstTo(
  processes: AgentProcess[],
  match: (e: AgentEvent) => boolean,
  withinMs: number,
  from: number[] = processes.map(() => 0),
): Promise<{ process: AgentProcess; event: AgentEvent }> {
  return Promise.race(
    processes.map((p, i) => p.waitFor(match, withinMs, from[i]).then((event) => ({ process: p, event }))),
  );
}

/**
 * Issue #45: a store that comes back empty stopped every agent of an API-defined shard for
 * good. Now the bridges notice it (the definitions' mark), log it once, count it, and give
 * the store the definitions back (from memory, or their backup file); the agents and `run`
 * stay up through it, and one is active again. Real processes: redis-server killed -9 and
 * started again empty, `shardbridge serve`, `agent` and `run`; who ran when is read from
 * the process table and the children's own records.
 */
describe("A store that comes back empty: bridges, agents and run stay and recover (real processes)", function () {
  this.timeout(120_000);
  let dir: string;
  let redis: TestRedisServer | undefined;
  const bridges: BridgeProcess[] = [];
  const processes: AgentProcess[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sb-store-loss-"));
  });
  afterEach(async function () {
    // A failed test's processes' own account, to read beside the assertion.
    if (this.currentTest?.state === "failed")
      for (const p of [...processes, ...bridges.map((b) => b.serve)])
        console.log(`      ${p.name}: ${p.events.map((e) => e.ev).join(", ")}`);
    await Promise.all(processes.splice(0).map((p) => p.kill()));
    await Promise.all(bridges.splice(0).map((b) => b.stop()));
    await redis?.stop();
    redis = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const bridge = async (store: string, backup: string | null, tokens?: BridgeProcess["tokens"]) => {
    const started = await startBridge({
      shards: [],
      agents: HOSTS,
      store,
      args: backup === null ? [] : ["--definitions-backup", join(dir, backup)],
      ...(tokens && { tokens }),
    });
    bridges.push(started);
    return started;
  };
  const define = (on: BridgeProcess) =>
    new BridgeClient(on.url, on.tokenFor("admin")).defineShard(SHARD, {
      lease_ttl_ms: TTL_MS,
      agents: HOSTS,
    });
  const agent = (id: string, on: BridgeProcess) => {
    const started = referenceAgent(id, SHARD, on);
    processes.push(started);
    return started;
  };
  /** Each is still the process it was started as: running, never exited. */
  const expectStayedUp = (stayed: AgentProcess[]) => {
    for (const p of stayed) {
      expect(p.child.exitCode, `${p.name} exited`).to.equal(null);
      expect(running(p.child.pid!), `${p.name} in the process table`).to.equal(true);
      expect(logged(p, "fatal"), `${p.name}'s fatal lines`).to.deep.equal([]);
    }
  };

  it("redis killed -9 and started again empty: two bridges give the definition back, two agents stay up, one is active again", async () => {
    redis = await TestRedisServer.start();
    const one = await bridge(redis.url, "one.json");
    const two = await bridge(redis.url, "two.json", one.tokens);
    await define(one);
    // In force on the other bridge within refresh_ms: an agent asking it sooner would be
    // told the shard is not defined, before it ever served it (a mistake: exit 2).
    await until(
      "the other bridge has the definition",
      () => new BridgeClient(two.url, two.tokenFor("admin")).shard(SHARD),
      (shard) => shard?.defined === true,
      3 * DEFINITIONS_REFRESH_MS,
    );
    const agents = [agent("compute-0", one), agent("compute-1", two)];
    const before = await firstTo(agents, (e) => e.ev === "active", 20_000);
    const standby = agents.find((a) => a !== before.process)!;
    await standby.waitFor((e) => e.ev === "standby", 10_000);

    const from = agents.map((a) => a.events.length);
    await redis.restart();
    const upAt = performance.now();
    const after = await firstTo(agents, (e) => e.ev === "active", 30_000, from);
    const tookMs = after.event.seenAt - upAt;
    console.log(
      `      active again ${Math.round(tookMs)} ms after redis-server was up again (ttl ${TTL_MS} ms)`,
    );
    expect(tookMs).to.be.below(STORE_HOLD_MS + DEFINITIONS_REFRESH_MS + 1000);
    expect(after.event.token).to.be.greaterThan(before.event.token as number);
    expectStayedUp(agents);

    // The definition is back in the store itself, and nobody wrote it but the bridges.
    const admin = redis.client();
    const record = await admin.hget("sb:{definitions}:records", SHARD);
    admin.disconnect();
    expect(JSON.parse(record!)).to.deep.include({ lease_ttl_ms: TTL_MS, agents: HOSTS });
    // Each bridge noticed, at a look at the store after it answered again (a look may first
    // wait out a command the kill left unanswered: its timeout, 2 s; and 1 s more). Then, a
    // few looks later, still once; and the store took the definition back once.
    for (const b of [one, two])
      await b.serve.waitFor((e) => e.ev === EMPTIED, 2 * DEFINITIONS_REFRESH_MS + 2000 + 1000);
    await new Promise((r) => setTimeout(r, 2 * DEFINITIONS_REFRESH_MS));
    for (const b of [one, two]) {
      // It said at start that this Redis (no AOF, no RDB) would lose everything on a restart.
      expect(
        b.serve.events.filter((e) => /neither an append-only file/.test(e.ev) && e.level === "warn"),
      ).to.have.length(1);
      expect(logged(b.serve, EMPTIED), "the error line, once").to.have.length(1);
      expect(logged(b.serve, EMPTIED)[0]!.level).to.equal("error");
      expect(await metric(b, 'shardbridge_store_losses_total{part="definitions"}')).to.equal(1);
    }
    const restored = await Promise.all(
      [one, two].map((b) => metric(b, "shardbridge_shard_definitions_restored_total")),
    );
    expect(restored.reduce((a, b) => a + b)).to.equal(1);
  });

  it("embedded store, the bridge killed -9 and started again: its backup gives the definition back, and `run` starts the child again", async () => {
    const only = await bridge("memory", "memory.json");
    await define(only);
    const records = join(dir, "records.txt");
    writeFileSync(records, "");
    const watch = watchChildren(records);
    try {
      const supervisors = HOSTS.map((host) => runFixture(host, SHARD, only, records));
      processes.push(...supervisors);
      await firstTo(supervisors, (e) => e.ev === "child-started", 20_000);

      const from = supervisors.map((s) => s.events.length);
      await only.restart();
      const upAt = performance.now();
      const again = await firstTo(supervisors, (e) => e.ev === "child-started", 30_000, from);
      const tookMs = again.event.seenAt - upAt;
      console.log(`      a child runs again ${Math.round(tookMs)} ms after the bridge answered again`);
      // The embedded store holds every shard for one TTL from its start (no second rounding).
      expect(tookMs).to.be.below(TTL_MS + DEFINITIONS_REFRESH_MS + 1000);
      expectStayedUp(supervisors);
      expect(watch.overlaps, "instants with two children running").to.deep.equal([]);
      await until(
        "the second child's own record",
        async () => lives(records).length,
        (n) => n === 2,
        3000,
      );

      const shown = await new BridgeClient(only.url, only.tokenFor("admin")).shardDefinitions();
      expect(shown.definitions.find((d) => d.name === SHARD)).to.deep.include({
        source: "store",
        agents: HOSTS,
      });
      const noticed = logged(only.serve, EMPTIED);
      expect(noticed, "the line, once").to.have.length(1);
      expect(noticed[0]!.level, "the embedded store starts empty by design").to.equal("warn");
      expect(await metric(only, 'shardbridge_store_losses_total{part="definitions"}')).to.equal(1);
    } finally {
      watch.stop();
    }
  });

  it("embedded store without a backup: the agents stand by through 404 shard.undefined, asking less and less often, until it is defined again", async () => {
    const only = await bridge("memory", null);
    await define(only);
    const agents = HOSTS.map((id) => agent(id, only));
    // Both were answered for the shard: only then is a 404 for it a passing state to them.
    const holder = await firstTo(agents, (e) => e.ev === "active", 20_000);
    await agents.find((a) => a !== holder.process)!.waitFor((e) => e.ev === "standby", 10_000);

    await only.restart();
    const upAt = performance.now();
    // Each says it once, whatever the number of refusals.
    await Promise.all(agents.map((a) => a.waitFor((e) => e.ev === "shard-undefined", 10_000)));
    const outageMs = 3 * UNDEFINED_MAX_WAIT_MS;
    await new Promise((r) => setTimeout(r, outageMs - (performance.now() - upAt)));
    const refusals = await metric(
      only,
      'shardbridge_http_requests_total{route="/v1/shards/:shard/lease",method="POST",status="404"}',
    );
    // Waits from 500 ms doubling to 5 s, each at least half its length (jitter): in 15 s an
    // agent asks at most 4 times before its waits reach 2.5 s, then once per 2.5 s at most.
    const most = 4 + Math.ceil(outageMs / (UNDEFINED_MAX_WAIT_MS / 2));
    console.log(
      `      ${refusals} acquires refused (404) in ${outageMs} ms, two agents (a poll each 0.25-0.5 s: 60-120)`,
    );
    expect(refusals).to.be.within(2, 2 * most);
    expectStayedUp(agents);
    for (const a of agents) expect(logged(a, "shard-undefined"), `${a.name} said it once`).to.have.length(1);

    const from = agents.map((a) => a.events.length);
    await define(only);
    const definedAt = performance.now();
    const back = await firstTo(agents, (e) => e.ev === "active", 30_000, from);
    const tookMs = back.event.seenAt - definedAt;
    console.log(`      active ${Math.round(tookMs)} ms after the shard was defined again`);
    expect(tookMs).to.be.below(UNDEFINED_MAX_WAIT_MS + 1000);
    expect(logged(back.process, "shard-defined-again")).to.have.length(1);
    expectStayedUp(agents);
  });
});
