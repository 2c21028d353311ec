import { expect } from "chai";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EventQueue } from "../src/sim/queue.js";
import { Coverage } from "../src/sim/coverage.js";
import { ScenarioError, parseScenario, type Scenario } from "../src/sim/scenario.js";
import { simulate, type SimulationReport } from "../src/sim/simulate.js";
import { runShardbridge } from "./helpers/cli.js";

const scenariosDir = fileURLToPath(new URL("../examples/scenarios/", import.meta.url));
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

  it("single crash: shards fail over within the lease TTL; nova's ring takes service_down_time plus a rebuild", () => {
    const report = simulate(example("single-crash"));
    const ttlS = report.leaseTtlMs / 1000;
    expect(report.shardsMode.worstRecoveryS).to.be.within(ttlS / 3, ttlS + 0.5);
    expect(report.shardsMode.nodesMoved).to.equal(100); // the crashed agent's one shard, once
    expect(report.shardsMode.doubleManagedNodeSeconds).to.equal(0);
    // nova: counted down after 60 s without heartbeat (sent every 10 s), then up to 60 s to each rebuild
    expect(report.legacyMode.worstRecoveryS).to.be.within(50, 130);
    expect(report.legacyMode.doubleManagedNodeSeconds).to.be.greaterThan(0); // when it comes back
  });

  it("never lets two agents act on a shard, nor a stale write through, where clocks keep time", () => {
    for (const name of ["single-crash", "long-pause", "redis-restart", "rolling-upgrade", "flapping-agent"]) {
      const { shardsMode } = simulate(example(name));
      expect(shardsMode.doubleManagedNodeSeconds, name).to.equal(0);
      expect(shardsMode.staleWritesAccepted, name).to.equal(0);
    }
  });

  it("a frozen holder's write in flight is refused by fencing when it wakes", () => {
    const report = simulate(example("long-pause"));
    expect(report.shardsMode.staleWritesRefused).to.be.greaterThan(0);
    expect(report.shardsMode.staleWritesAccepted).to.equal(0);
    // 30 s frozen is short of nova's service_down_time: nobody notices, nothing moves.
    expect(report.legacyMode.nodesMoved).to.equal(0);
  });

  it("shows what a slow clock does: two agents act, and fencing still lets no stale write through", () => {
    const report = simulate(example("partition-and-skew"));
    expect(report.shardsMode.doubleManagedNodeSeconds).to.be.greaterThan(0);
    expect(report.shardsMode.staleWritesAccepted).to.equal(0);
  });

  it("rolling upgrade: leases hand over in well under a second; under the ring each agent's nodes wait out its restart", () => {
    const report = simulate(example("rolling-upgrade"));
    expect(report.shardsMode.worstRecoveryS).to.be.below(1);
    expect(report.legacyMode.worstRecoveryS).to.be.within(19.9, 20.1);
  });

  it("a Redis restart costs the shards one TTL of recovery wait; nova's ring does not use Redis", () => {
    const report = simulate(example("redis-restart"));
    expect(report.shardsMode.worstRecoveryS).to.be.within(
      report.leaseTtlMs / 1000 - 1,
      report.leaseTtlMs / 1000 + 2,
    );
    expect(report.legacyMode.unmanagedNodeSeconds).to.equal(0);
  });

  it("a one-way partition (the agent is heard, hears nothing) moves its shard within the renew deadline plus a TTL", () => {
    const report = simulate(
      parseScenario(
        JSON.stringify({
          name: "one-way",
          seed: 3,
          duration: "3m",
          fleet: { nodes: 100, shards: 2, agents_per_shard: 2, lease_ttl_ms: 6000 },
          timeline: [
            { at: "30s", fault: "partition", agent: "compute-0", direction: "from-redis", for: "90s" },
          ],
        }),
      ),
    );
    // Deadline 4 s, then at most one lease it never hears of (6 s), then a standby poll.
    expect(report.shardsMode.worstRecoveryS).to.be.within(4, 4 + 6 + 0.6);
    expect(report.shardsMode.doubleManagedNodeSeconds).to.equal(0);
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
