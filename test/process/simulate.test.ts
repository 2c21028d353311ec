import { expect } from "chai";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EventQueue } from "../../src/tools/sim/queue.js";
import { Coverage } from "../../src/tools/sim/coverage.js";
import { ScenarioError, parseScenario, type Scenario } from "../../src/tools/sim/scenario.js";
import { layoutFleet } from "../../src/tools/sim/fleet.js";
import { CruiseBroken } from "../../src/tools/sim/shards-mode.js";
import {
  playShards,
  simulate,
  simulateShippedKeepers,
  stepsOf,
  type SimulationReport,
} from "../../src/tools/sim/simulate.js";
import { seededRandom } from "../../src/runtime/random.js";
import { runShardbridge } from "../helpers/cli.js";

const scenariosDir = fileURLToPath(new URL("../../examples/scenarios/", import.meta.url));
/** A scenario written out in the test. */
const inline = (spec: object): Scenario => parseScenario(JSON.stringify(spec), "inline");
const example = (name: string): Scenario =>
  parseScenario(readFileSync(join(scenariosDir, `${name}.json`), "utf8"), name);

describe("Simulator: pure parts", () => {
  it("runs events in time order, equal times in the order they were scheduled", () => {
    const queue = new EventQueue();
    const seen: string[] = [];
    queue.at(30, () => seen.push("c"));
    queue.at(10, () => {
      seen.push("a");
      queue.at(10, () => seen.push("a2")); // same time, scheduled later: runs after b
    });
    queue.at(10, () => seen.push("b"));
    queue.at(99, () => seen.push("late"));
    queue.runUntil(50);
    expect(seen).to.deep.equal(["a", "b", "a2", "c"]);
    expect(queue.now).to.equal(50);
  });

  it("ranks events due at one instant: faults first, then renews by keeper number, then the rest as scheduled; a put-off event keeps its class", () => {
    const queue = new EventQueue();
    const seen: string[] = [];
    queue.at(10, () => seen.push("other-1"));
    queue.atRenew(10, 7, () => seen.push("renew-7"));
    queue.atRenew(10, 3, () => seen.push("renew-3"));
    queue.at(10, () => seen.push("other-2"));
    queue.atFirst(10, () => seen.push("fault"));
    let frozen = true;
    queue.atRenew(
      5,
      9,
      (arg) => {
        seen.push(`renew-9 (${arg}) at ${queue.now}`);
        if (frozen) queue.putOff(10); // frozen until 10: runs then, still as a renew, after 7
        frozen = false;
      },
      1,
    );
    queue.runUntil(20);
    expect(seen).to.deep.equal([
      "renew-9 (1) at 5",
      "fault",
      "renew-3",
      "renew-7",
      "renew-9 (1) at 10",
      "other-1",
      "other-2",
    ]);
    expect(queue.isBeforeNow(19, 0)).to.equal(true);
  });

  it("integrates unmanaged and double-managed node-seconds, moves and recovery spells", () => {
    const coverage = new Coverage([10, 5], 0);
    coverage.add(0, 1, 0);
    coverage.add(1, 1, 0);
    coverage.remove(0, 2_000_000); // shard 0 (10 nodes) unmanaged 2 s .. 5 s
    coverage.add(0, 2, 5_000_000); // moved to agent 2
    coverage.add(1, 3, 6_000_000); // shard 1 (5 nodes) double-managed 6 s .. 8 s
    coverage.remove(1, 8_000_000);
    const summary = coverage.summary(10_000_000);
    expect(summary.unmanagedNodeSeconds).to.equal(30);
    expect(summary.doubleManagedNodeSeconds).to.equal(10);
    expect(summary.nodesMoved).to.equal(15);
    expect(summary.worstRecoveryS).to.equal(3);
  });
});

describe("Simulator: scenarios", function () {
  this.timeout(60_000);

  it("is deterministic: the same scenario gives the same report, byte for byte; another seed another", () => {
    const a = JSON.stringify(simulate(example("fleet-10k")));
    const b = JSON.stringify(simulate(example("fleet-10k")));
    expect(a).to.equal(b);
    const other = example("fleet-10k");
    other.seed = 99;
    expect(JSON.stringify(simulate(other))).to.not.equal(a);
  });

  it("ships the scenarios the operators asked for, each valid", () => {
    const files = readdirSync(scenariosDir).filter((f) => f.endsWith(".json"));
    for (const want of [
      "single-crash",
      "long-pause",
      "redis-restart",
      "rolling-upgrade",
      "flapping-agent",
      "fleet-10k",
    ])
      expect(files).to.include(`${want}.json`);
    for (const file of files)
      expect(() => parseScenario(readFileSync(join(scenariosDir, file), "utf8"), file)).to.not.throw();
    expect(example("fleet-10k").fleet.nodes).to.equal(10_000);
  });
});

/**
 * The simulator's behaviour, under either driver of the agents' keepers: its own (fast,
 * with shortcuts a day of faults needs) and the shipped LeaseKeeper (every poll and timer
 * an event). The same assertions hold both: the bounds come from the lease rules, not
 * from either driver.
 */
const DRIVERS: Array<{ name: string; run: (scenario: Scenario) => Promise<SimulationReport> }> = [
  { name: "the simulator's keeper driver", run: (scenario) => Promise.resolve(simulate(scenario)) },
  { name: "the shipped LeaseKeeper", run: (scenario) => simulateShippedKeepers(scenario) },
];

/** The shipped scenarios whose clocks keep time: nobody may act twice in them. */
const CLOCKS_KEEP_TIME = ["single-crash", "long-pause", "redis-restart", "rolling-upgrade", "flapping-agent"];

for (const { name: driver, run } of DRIVERS)
  describe(`Simulator, keepers run by ${driver}`, function () {
    this.timeout(120_000);

    it("the same scenario gives the same report, byte for byte", async () => {
      const first = JSON.stringify(await run(example("long-pause")));
      expect(JSON.stringify(await run(example("long-pause")))).to.equal(first);
    });

    it("single crash: shards fail over within the lease TTL; nova's ring takes service_down_time plus a rebuild", async () => {
      const report = await run(example("single-crash"));
      const ttlS = report.leaseTtlMs / 1000;
      expect(report.shardsMode.worstRecoveryS).to.be.within(ttlS / 3, ttlS + 0.5);
      expect(report.shardsMode.nodesMoved).to.equal(100); // the crashed agent's one shard, once
      expect(report.shardsMode.doubleManagedNodeSeconds).to.equal(0);
      // nova: counted down after 60 s without heartbeat (sent every 10 s), then up to 60 s to each rebuild
      expect(report.legacyMode.worstRecoveryS).to.be.within(50, 130);
      expect(report.legacyMode.doubleManagedNodeSeconds).to.be.greaterThan(0); // when it comes back
    });

    it("never lets two agents act on a shard, nor a stale write through, where clocks keep time", async () => {
      for (const name of CLOCKS_KEEP_TIME) {
        const { shardsMode } = await run(example(name));
        expect(shardsMode.doubleManagedNodeSeconds, name).to.equal(0);
        expect(shardsMode.staleWritesAccepted, name).to.equal(0);
      }
    });

    it("standbys that wait (standby_wait_ms): a handover costs no poll, a crash the TTL; still never two agents, no stale write", async () => {
      const waiting = (name: string) => {
        const scenario = example(name);
        scenario.fleet.standby_wait_ms = 30_000;
        return scenario;
      };
      // Rolling upgrade: each SIGTERM hands over as the release lands (a round trip), not a poll later.
      const polled = (await run(example("rolling-upgrade"))).shardsMode;
      const waited = (await run(waiting("rolling-upgrade"))).shardsMode;
      expect(waited.worstRecoveryS, "a handover, waiting").to.be.below(0.01);
      expect(waited.unmanagedNodeSeconds).to.be.below(polled.unmanagedNodeSeconds / 50);
      // A crash: granted at the lease's end (the bridge's timer), not a poll after it.
      const crash = await run(waiting("single-crash"));
      const ttlS = crash.leaseTtlMs / 1000;
      expect(crash.shardsMode.worstRecoveryS).to.be.within(ttlS / 3, ttlS + 0.01);
      expect(crash.shardsMode.worstRecoveryS).to.be.below(
        (await run(example("single-crash"))).shardsMode.worstRecoveryS,
      );
      for (const name of CLOCKS_KEEP_TIME) {
        const { shardsMode } = await run(waiting(name));
        expect(shardsMode.doubleManagedNodeSeconds, name).to.equal(0);
        expect(shardsMode.staleWritesAccepted, name).to.equal(0);
      }
    });

    it("a frozen holder's write in flight is refused by fencing when it wakes", async () => {
      const report = await run(example("long-pause"));
      expect(report.shardsMode.staleWritesRefused).to.be.greaterThan(0);
      expect(report.shardsMode.staleWritesAccepted).to.equal(0);
      // 30 s frozen is short of nova's service_down_time: nobody notices, nothing moves.
      expect(report.legacyMode.nodesMoved).to.equal(0);
    });

    it("shows what a slow clock does: two agents act, and fencing still lets no stale write through", async () => {
      const report = await run(example("partition-and-skew"));
      expect(report.shardsMode.doubleManagedNodeSeconds).to.be.greaterThan(0);
      expect(report.shardsMode.staleWritesAccepted).to.equal(0);
    });

    it("rolling upgrade: leases hand over in well under a second; under the ring each agent's nodes wait out its restart", async () => {
      const report = await run(example("rolling-upgrade"));
      expect(report.shardsMode.worstRecoveryS).to.be.below(1);
      expect(report.legacyMode.worstRecoveryS).to.be.within(19.9, 20.1);
    });

    it("a Redis restart costs the shards one TTL of recovery wait; nova's ring does not use Redis", async () => {
      const report = await run(example("redis-restart"));
      expect(report.shardsMode.worstRecoveryS).to.be.within(
        report.leaseTtlMs / 1000 - 1,
        report.leaseTtlMs / 1000 + 2,
      );
      expect(report.legacyMode.unmanagedNodeSeconds).to.equal(0);
    });

    it("a Redis failover to a replica that lags: every shard held a TTL from its first operation on the promoted server, nobody acting twice, no stale write through", async () => {
      const failover = (lag: string, seed: number) =>
        run(
          inline({
            name: "failover",
            seed,
            duration: "40s",
            fleet: {
              nodes: 60,
              shards: 3,
              agents_per_shard: 2,
              lease_ttl_ms: 3000,
              write_interval_ms: 500,
            },
            timeline: [{ at: "10s", fault: "redis-failover", lag, down: "300ms" }],
          }),
        );
      for (let seed = 1; seed <= 10; seed++)
        for (const lag of ["0ms", "700ms", "2500ms"]) {
          const report = await failover(lag, seed);
          const where = `seed ${seed}, lag ${lag}`;
          // Down 0.3 s, then a hold of one TTL (3 s) from each shard's first operation, then
          // a standby's poll (jittered, at most 500 ms).
          expect(report.shardsMode.worstRecoveryS, where).to.be.within(3, 0.3 + 3 + 0.5 + 1);
          expect(report.shardsMode.nodesMoved, where).to.be.at.most(60);
          expect(report.shardsMode.doubleManagedNodeSeconds, where).to.equal(0);
          expect(report.shardsMode.staleWritesAccepted, where).to.equal(0);
          expect(report.legacyMode.unmanagedNodeSeconds, where).to.equal(0); // nova does not use Redis
        }
    });

    it("an agent restarted again and again with requests in flight: a dead process's answers reach no one, nobody acts twice", async () => {
      for (const standby_wait_ms of [0, 30_000])
        for (let seed = 1; seed <= 3; seed++) {
          const report = await run(
            inline({
              name: "restarts",
              seed,
              duration: "60s",
              fleet: {
                nodes: 20,
                shards: 2,
                agents_per_shard: 2,
                lease_ttl_ms: 3000,
                latency_ms: 40,
                standby_poll_ms: 200,
                standby_wait_ms,
              },
              timeline: [
                {
                  at: "10037ms",
                  fault: "restart",
                  agent: "compute-0",
                  repeat: { every: "1013ms", times: 40 },
                },
              ],
            }),
          );
          const where = `seed ${seed}, wait ${standby_wait_ms}`;
          expect(report.shardsMode.doubleManagedNodeSeconds, where).to.equal(0);
          expect(report.shardsMode.staleWritesAccepted, where).to.equal(0);
        }
    });

    it("a holder whose clock runs fast, frozen past its deadline beside others frozen: each stops at its own deadline, nobody acts twice", async () => {
      for (const seed of [41, 42, 43]) {
        const at = 20 + (seed % 7) * 1.37;
        const ms = (s: number) => `${Math.round(s * 1000)}ms`;
        const report = await run(
          inline({
            name: "a fast clock, then frozen",
            seed,
            duration: "60s",
            fleet: {
              nodes: 40,
              shards: 4,
              agents_per_shard: 2,
              lease_ttl_ms: 6000,
              write_interval_ms: 300,
            },
            timeline: [
              { at: ms(at), fault: "pause", agent: "compute-0", for: "20s" },
              { at: ms(at + 1.1), fault: "clock-skew", agent: "compute-2", rate: 1.7 },
              { at: ms(at + 2.1), fault: "pause", agent: "compute-2", for: "15s" },
              { at: ms(at + 3.3), fault: "pause", agent: "compute-1", for: "15s" },
            ],
          }),
        );
        expect(report.shardsMode.doubleManagedNodeSeconds, `seed ${seed}`).to.equal(0);
        expect(report.shardsMode.staleWritesAccepted, `seed ${seed}`).to.equal(0);
      }
    });

    it("a standby cut off both ways and back, then the holder dies: the standby's requests timed out and it polls again, taking over within a TTL and a poll", async () => {
      const report = await run(
        inline({
          name: "standby cut off, then the holder dies",
          seed: 3,
          duration: "2m",
          fleet: { nodes: 100, shards: 1, agents_per_shard: 2, lease_ttl_ms: 6000 },
          timeline: [
            { at: "20s", fault: "partition", agent: "compute-1", direction: "both", for: "20s" },
            { at: "60s", fault: "crash", agent: "compute-0" },
          ],
        }),
      );
      expect(report.shardsMode.worstRecoveryS).to.be.within(6 - 2, 6 + 0.5 + 0.01);
      expect(report.shardsMode.doubleManagedNodeSeconds).to.equal(0);
    });

    it("a one-way partition (the agent is heard, hears nothing) moves its shard within the renew deadline plus a TTL", async () => {
      const report = await run(
        inline({
          name: "one-way",
          seed: 3,
          duration: "3m",
          fleet: { nodes: 100, shards: 2, agents_per_shard: 2, lease_ttl_ms: 6000 },
          timeline: [
            { at: "30s", fault: "partition", agent: "compute-0", direction: "from-redis", for: "90s" },
          ],
        }),
      );
      // Deadline 4 s, then at most one lease it never hears of (6 s), then a standby poll.
      expect(report.shardsMode.worstRecoveryS).to.be.within(4, 4 + 6 + 0.6);
      expect(report.shardsMode.doubleManagedNodeSeconds).to.equal(0);
    });
  });

describe("Simulator: healthy holders cruise (their renews outside the queue), with the same result", function () {
  this.timeout(120_000);

  const cruised = (scenario: Scenario): number => {
    const layout = layoutFleet(scenario, seededRandom(scenario.seed));
    return playShards(scenario, layout, stepsOf(scenario, layout.agents), true, () => undefined).result
      .cruisedRenews;
  };
  const bothWays = (scenario: Scenario) => ({
    cruising: JSON.stringify(simulate(scenario, undefined, { cruise: true })),
    queued: JSON.stringify(simulate(scenario, undefined, { cruise: false })),
  });

  it("the shipped scenarios: the same report, byte for byte, with renews cruised", () => {
    for (const file of readdirSync(scenariosDir).filter((f) => f.endsWith(".json"))) {
      const scenario = example(file.replace(/\.json$/, ""));
      const { cruising, queued } = bothWays(scenario);
      expect(cruising, file).to.equal(queued);
      expect(cruised(scenario), `${file}: renews cruised`).to.be.greaterThan(0);
    }
  });

  it("random fleets under every kind of fault, latency and TTL: the same report (property, seeded)", () => {
    const agentFaults = ["crash", "restart", "pause", "partition", "clock-skew"] as const;
    let renews = 0;
    for (let seed = 1; seed <= 25; seed++) {
      const random = seededRandom(seed * 7919);
      const shards = 1 + Math.floor(random() * 4);
      const perShard = 1 + Math.floor(random() * 3);
      const agents = Math.max(perShard, Math.floor(shards * perShard * (0.5 + random())));
      const timeline: unknown[] = [];
      // Whole seconds, as operators write them: faults then land on the same instants
      // as renews of agents that started at a fault, the ties the ranks decide.
      for (let at = 5 + Math.floor(random() * 10); at < 170; at += 1 + Math.floor(random() * 25)) {
        const agent = `compute-${Math.floor(random() * agents)}`;
        const kind =
          random() < 0.08
            ? "redis-failover"
            : random() < 0.1
              ? "redis-restart"
              : random() < 0.05
                ? "rolling-restart"
                : agentFaults[Math.floor(random() * 5)]!;
        timeline.push(
          kind === "redis-restart"
            ? { at: `${at}s`, fault: kind, down: `${Math.floor(random() * 3000)}ms` }
            : kind === "redis-failover"
              ? {
                  at: `${at}s`,
                  fault: kind,
                  lag: `${Math.floor(random() * 1000)}ms`,
                  down: `${Math.floor(random() * 2000)}ms`,
                }
              : kind === "rolling-restart"
                ? { at: `${at}s`, fault: kind, interval: "2s", downtime: "1s" }
                : kind === "pause" || kind === "partition"
                  ? {
                      at: `${at}s`,
                      fault: kind,
                      agent,
                      for: `${Math.floor(random() * 15000)}ms`,
                      ...(kind === "partition"
                        ? { direction: ["both", "to-redis", "from-redis"][Math.floor(random() * 3)] }
                        : {}),
                    }
                  : kind === "clock-skew"
                    ? { at: `${at}s`, fault: kind, agent, rate: 0.3 + random() * 1.5, for: "20s" }
                    : { at: `${at}s`, fault: kind, agent },
        );
      }
      const scenario = parseScenario(
        JSON.stringify({
          name: `random ${seed}`,
          seed,
          duration: "3m",
          fleet: {
            nodes: 10 * shards,
            shards,
            agents_per_shard: perShard,
            agents,
            lease_ttl_ms: 1000 + Math.floor(random() * 8) * 1000,
            latency_ms: [0, 0.5, 2, 40][Math.floor(random() * 4)],
            write_interval_ms: 500 + Math.floor(random() * 5000),
            standby_poll_ms: 100 + Math.floor(random() * 900),
            standby_wait_ms: random() < 0.5 ? 0 : 30_000,
          },
          timeline,
        }),
        `random ${seed}`,
      );
      const { cruising, queued } = bothWays(scenario);
      expect(cruising, `seed ${seed}`).to.equal(queued);
      renews += cruised(scenario);
    }
    expect(renews, "renews cruised over all the fleets").to.be.greaterThan(1000);
  });

  it("pausing an agent that has crashed does nothing (the simulator hung on it, re-arming a dead keeper's deadline watch at one instant)", () => {
    const scenario = inline({
      name: "pause after crash",
      seed: 14,
      duration: "1m",
      fleet: { nodes: 20, shards: 2, agents_per_shard: 2, lease_ttl_ms: 7000, latency_ms: 40 },
      timeline: [
        { at: "10s", fault: "crash", agent: "compute-0" },
        { at: "30s", fault: "pause", agent: "compute-0", for: "3s" },
        { at: "31s", fault: "restart", agent: "compute-0" },
      ],
    });
    const { cruising, queued } = bothWays(scenario);
    expect(cruising).to.equal(queued);
    // Restarted during the pause that did not happen: it runs (and stands by) at once.
    const report = JSON.parse(cruising) as SimulationReport;
    expect(report.shardsMode.events).to.be.below(10_000);
  });

  it("a cruise whose renew would be refused is not kept: the run is played again with every renew queued", () => {
    // A clock running at a third of the pace renews just as the lease runs out: whether
    // a renew comes in time turns on a microsecond of rounding, here after a few clean ones.
    const scenario = inline({
      name: "a third of the pace",
      seed: 2,
      duration: "10m",
      fleet: { nodes: 20, shards: 2, agents_per_shard: 2 },
      timeline: [{ at: "10s", fault: "clock-skew", agent: "compute-0", rate: 0.33333334 }],
    });
    expect(() => cruised(scenario)).to.throw(CruiseBroken, /would have been refused/);
    const { cruising, queued } = bothWays(scenario);
    expect(cruising).to.equal(queued);
  });
});

describe("Simulator: bad scenarios are refused naming the line", () => {
  const problems = (text: string): string => {
    try {
      parseScenario(text, "bad.json");
    } catch (error) {
      expect(error).to.be.instanceOf(ScenarioError);
      return (error as Error).message;
    }
    throw new Error("accepted a bad scenario");
  };
  const file = (timeline: string, fleet = '"nodes": 10, "shards": 2') =>
    `{\n  "name": "bad",\n  "duration": "10m",\n  "fleet": { ${fleet} },\n  "timeline": [\n${timeline}\n  ]\n}\n`;

  it("an unknown fault kind", () => {
    const text = file(
      `    { "at": "1m", "fault": "crash", "agent": "compute-0" },\n    { "at": "2m", "fault": "meteor" }`,
    );
    expect(problems(text)).to.match(
      /^bad\.json:7: timeline\[1\]\.fault: unknown fault: one of crash, restart/,
    );
  });

  it("a failover whose lag reaches back past the failover before it", () => {
    const text = file(
      `    { "at": "1m", "fault": "redis-failover" },\n    { "at": "70s", "fault": "redis-failover", "lag": "15s" }`,
    );
    expect(problems(text)).to.match(
      /^bad\.json:7: timeline\[1\]\.lag: a lag of 15000 ms at 70000 ms reaches back past the redis-failover at 60000 ms/,
    );
  });

  it("times out of order", () => {
    const text = file(
      `    { "at": "2m", "fault": "crash", "agent": "compute-0" },\n    { "at": "90s", "fault": "restart", "agent": "compute-0" }`,
    );
    expect(problems(text)).to.match(
      /^bad\.json:7: timeline\[1\]\.at: out of order: 90000 ms comes after 120000 ms/,
    );
  });

  it("more agents than ids, and an agent that is not in the fleet", () => {
    const text = file(
      `    { "at": "1m", "fault": "crash", "agent": "compute-7" }`,
      `"nodes": 10, "shards": 2, "agents": 3,\n    "agent_ids": ["a", "b"]`,
    );
    const message = problems(text);
    expect(message).to.match(/bad\.json:4: fleet\.agents: 3 agents but only 2 ids in agent_ids/);
    expect(message).to.match(/bad\.json:7: timeline\[0\]\.agent: compute-7 is not an agent of this fleet/);
  });

  it("a malformed duration, and broken JSON", () => {
    expect(problems(file(`    { "at": "soon", "fault": "redis-restart" }`))).to.match(
      /bad\.json:6: timeline\[0\]\.at: "soon" is not a duration/,
    );
    expect(problems('{\n  "name": "x",\n  "duration": 5 5\n}')).to.match(/^bad\.json:3: \(syntax\)/);
  });
});

describe("shardbridge simulate (command)", function () {
  this.timeout(60_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "sb-sim-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = (args: string[]) => runShardbridge(["simulate", ...args]);

  it("prints the same JSON for the same scenario, writes the HTML timeline, and a table", async () => {
    const file = join(scenariosDir, "single-crash.json");
    const html = join(dir, "timeline.html");
    const [first, second] = await Promise.all([run([file, "--json"]), run([file, "--json", "--html", html])]);
    expect(first.status, first.stderr).to.equal(0);
    expect(first.stdout).to.equal(second.stdout);
    const report = JSON.parse(first.stdout) as SimulationReport;
    expect(report.shardsMode.activity.length).to.be.greaterThan(0);
    const page = readFileSync(html, "utf8");
    expect(page).to.match(/<svg/);
    expect(page).to.include("Active agent per shard");
    // The shipped LeaseKeeper as the keepers: every poll and timer an event; nova's ring as before.
    const shipped = await run([file, "--json", "--shipped-keepers"]);
    expect(shipped.status, shipped.stderr).to.equal(0);
    const shippedReport = JSON.parse(shipped.stdout) as SimulationReport;
    expect(shippedReport.shardsMode.events).to.be.greaterThan(report.shardsMode.events);
    expect(shippedReport.shardsMode.staleWritesAccepted).to.equal(0);
    expect(shippedReport.legacyMode).to.deep.equal(report.legacyMode);
    const table = await run([file, "--seed", "4"]);
    expect(table.stdout).to.match(/unmanaged node-seconds\s+[\d,.]+\s+[\d,.]+/);
    expect(table.stdout).to.include("seed 4");
  });

  it("refuses a bad scenario with its line, exit 1, nothing on stdout", async () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, '{\n  "name": "x",\n  "duration": "1m",\n  "fleet": { "nodes": 0, "shards": 1 }\n}\n');
    const result = await run([bad]);
    expect(result.status).to.equal(1);
    expect(result.stdout).to.equal("");
    expect(result.stderr).to.include(`${bad}:4: fleet.nodes:`);
  });
});
