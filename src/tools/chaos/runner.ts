import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { actsAfter, parseTransition } from "../../core/keeper/transition-log.js";
import { devTokens } from "../../runtime/tokens-file.js";
import { Coverage, type CoverageSummary } from "../sim/coverage.js";
import { layoutFleet } from "../sim/fleet.js";
import type { Scenario } from "../sim/scenario.js";
import { stepsOf } from "../sim/simulate.js";
import { seededRandom } from "../../runtime/random.js";
import { FailoverRedis } from "./failover-redis.js";
import { freePort } from "./free-port.js";
import { PrivateRedisServer } from "./redis-server.js";

/** Agent processes one chaos run may start at most: real processes on one machine. */
export const CHAOS_MAX_PROCESSES = 64;

export interface ChaosReport extends CoverageSummary {
  scenario: string;
  durationS: number;
  /** faults the real run cannot make (a network cut, a clock running off): left out */
  skipped: string[];
  /**
   * lease renewals the store refused (stale token, expired, another holder): each one a
   * holder told to stop. From shardbridge_lease_lost_total, which only renewals feed.
   */
  renewalsRefused: number;
  /** failover times: from each kill or freeze of an active agent, or Redis fault, to the next `active` line, s */
  failoversS: number[];
  /**
   * Per redis-failover: whether the promoted server really lacked the lag's writes (a
   * write made on the master after its replica stopped following is missing on it, one
   * made before is there). False means the run did not play the scenario's fault.
   */
  failoverLagSeen: boolean[];
}

interface AgentRun {
  agent: number;
  shard: number;
  child: ChildProcess | null;
}

/** How to start `shardbridge`: a program and its leading arguments. */
export interface ShardbridgeCommand {
  command: string;
  args: string[];
}

/** The command this process runs as (node + tsx in development, node + dist in a build). */
export function selfCommand(): ShardbridgeCommand {
  return { command: process.execPath, args: [...process.execArgv, process.argv[1]!] };
}

function startProcess(
  self: ShardbridgeCommand,
  args: string[],
  env: NodeJS.ProcessEnv,
  onLine: (line: string) => void,
): ChildProcess {
  const child = spawn(self.command, [...self.args, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  createInterface({ input: child.stdout }).on("line", onLine);
  child.stderr.resume();
  return child;
}

/**
 * Play a scenario against real processes: a redis-server of its own, a bridge on it, and
 * one reference agent process per agent and shard it may serve, with the scenario's
 * faults done for real (kill -9, SIGSTOP/SIGCONT, SIGTERM, a Redis killed and started
 * empty, a Redis failover to a replica that lags: see FailoverRedis). Who was active when comes from the agents' own `active`, `lost` and `released`
 * log lines, and feeds the same bookkeeping as the simulator. A network cut and a clock
 * running off cannot be made here without root: they are skipped and listed.
 */
export async function runChaos(
  scenario: Scenario,
  log: (line: string) => void = () => undefined,
  shardbridge: ShardbridgeCommand = selfCommand(),
): Promise<ChaosReport> {
  const layout = layoutFleet(scenario, seededRandom(scenario.seed));
  const pairs: AgentRun[] = [];
  layout.candidates.forEach((agents, shard) => {
    for (const agent of agents) pairs.push({ agent, shard, child: null });
  });
  if (pairs.length > CHAOS_MAX_PROCESSES)
    throw new Error(
      `chaos: ${pairs.length} agent processes (agents × shards they serve); at most ${CHAOS_MAX_PROCESSES} on one machine — use a smaller fleet`,
    );
  const ttlMs = scenario.fleet.lease_ttl_ms;
  const dir = mkdtempSync(join(tmpdir(), "sb-chaos-"));
  const children = new Set<ChildProcess>();
  // A failover needs a replica to promote, and one address that moves (see FailoverRedis).
  const failsOver = scenario.timeline.some((fault) => fault.fault === "redis-failover");
  const redis = failsOver ? await FailoverRedis.start() : await PrivateRedisServer.start();
  try {
    mkdirSync(join(dir, "shards"));
    const shardName = (s: number) => `shard-${s}`;
    for (let s = 0; s < layout.candidates.length; s++)
      writeFileSync(
        join(dir, "shards", `${shardName(s)}.json`),
        JSON.stringify({ name: shardName(s), lease_ttl_ms: ttlMs }),
      );
    const tokensFile = join(dir, "tokens.json");
    const tokens = devTokens(layout.agents);
    writeFileSync(tokensFile, JSON.stringify(tokens));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const bridge = startProcess(
      shardbridge,
      [
        "serve",
        "--port",
        String(port),
        "--store",
        redis.url,
        "--shards",
        join(dir, "shards"),
        "--tokens",
        tokensFile,
      ],
      { SHARDBRIDGE_LOG_LEVEL: "warn" },
      () => undefined,
    );
    children.add(bridge);
    for (let deadline = Date.now() + 20_000; ;) {
      const ok = await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error("chaos: the bridge did not come up within 20 s");
      await sleep(50);
    }

    // Belief changes from the agents' logs: [wall ms, shard, agent, +1 | -1].
    const changes: Array<[number, number, number, 1 | -1]> = [];
    const believing = new Map<string, boolean>();
    const note = (run: AgentRun, atMs: number, on: boolean) => {
      const key = `${run.agent}/${run.shard}`;
      if ((believing.get(key) ?? false) === on) return;
      believing.set(key, on);
      changes.push([atMs, run.shard, run.agent, on ? 1 : -1]);
    };
    const launch = (run: AgentRun) => {
      const child = startProcess(
        shardbridge,
        [
          "agent",
          "--id",
          layout.agents[run.agent]!,
          "--shard",
          shardName(run.shard),
          "--bridge",
          url,
          "--tokens-file",
          tokensFile,
        ],
        {},
        (line) => {
          const transition = parseTransition(line);
          if (transition !== null) note(run, Date.parse(transition.timestamp), actsAfter(transition));
        },
      );
      children.add(child);
      child.once("exit", () => children.delete(child));
      run.child = child;
    };
    const kill = async (run: AgentRun, signal: NodeJS.Signals) => {
      const child = run.child;
      if (child === null || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill(signal);
      if (signal === "SIGKILL") note(run, Date.now(), false); // a dead process acts no more
      await exited;
      note(run, Date.now(), false);
      run.child = null;
    };

    // Steady state first: each shard's first candidate active, then the standbys.
    const firsts = pairs.filter((p) => layout.candidates[p.shard]![0] === p.agent);
    for (const run of firsts) launch(run);
    for (let deadline = Date.now() + ttlMs + 30_000; ;) {
      if (firsts.every((r) => believing.get(`${r.agent}/${r.shard}`) === true)) break;
      if (Date.now() > deadline) throw new Error("chaos: the first agents did not become active");
      await sleep(50);
    }
    for (const run of pairs) if (run.child === null) launch(run);
    await sleep(Math.min(2000, ttlMs));
    const t0 = Date.now();
    log(`chaos: steady state; the timeline starts (${scenario.timeline.length} faults)`);

    const skipped: string[] = [];
    const faultTimes: number[] = [];
    const failoverLagSeen: boolean[] = [];
    const steps = stepsOf(scenario, layout.agents);
    const pending: Array<Promise<void>> = [];
    for (const step of steps) {
      await sleep(t0 + step.atUs / 1000 - Date.now());
      const runs = "agent" in step ? pairs.filter((p) => p.agent === step.agent) : [];
      const who = "agent" in step ? layout.agents[step.agent] : "redis";
      log(`chaos: ${((Date.now() - t0) / 1000).toFixed(1)} s: ${step.kind} ${who}`);
      switch (step.kind) {
        case "crash":
          faultTimes.push(Date.now());
          await Promise.all(runs.map((r) => kill(r, "SIGKILL")));
          break;
        case "stop":
          await Promise.all(runs.map((r) => kill(r, "SIGTERM")));
          break;
        case "start":
          await Promise.all(runs.map((r) => kill(r, "SIGKILL")));
          for (const r of runs) launch(r);
          break;
        case "pause":
          faultTimes.push(Date.now());
          for (const r of runs) r.child?.kill("SIGSTOP");
          pending.push(
            sleep(step.untilUs / 1000 + t0 - Date.now()).then(() => {
              for (const r of runs) r.child?.kill("SIGCONT");
            }),
          );
          break;
        case "redis-restart":
          faultTimes.push(Date.now());
          await redis.kill();
          await sleep(step.downUs / 1000);
          await redis.restart();
          break;
        case "replica-stops":
          if (redis instanceof FailoverRedis) await redis.replicaStops();
          break;
        case "redis-failover":
          faultTimes.push(Date.now());
          if (redis instanceof FailoverRedis) failoverLagSeen.push(await redis.failover(step.downUs / 1000));
          break;
        case "cut":
        case "rate":
          skipped.push(`${step.kind === "cut" ? "partition" : "clock-skew"} ${who} at ${step.atUs / 1e6} s`);
          break;
      }
    }
    await sleep(t0 + scenario.duration - Date.now());
    await Promise.all(pending);
    const endMs = Date.now();

    const metrics = await fetch(`${url}/metrics`).then(
      (r) => r.text(),
      () => "",
    );
    const renewalsRefused = [...metrics.matchAll(/^shardbridge_lease_lost_total\{[^}]*\} (\d+)/gm)]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);

    // The same bookkeeping as the simulator, on the agents' own timestamps (µs from t0).
    const coverage = new Coverage(layout.shardWeights, 0);
    const start = changes.filter(([at]) => at <= t0);
    const during = changes.filter(([at]) => at > t0 && at <= endMs).sort((a, b) => a[0] - b[0]);
    const state = new Map<string, boolean>();
    for (const [, shard, agent, delta] of start) state.set(`${agent}/${shard}`, delta === 1);
    for (const [key, on] of state)
      if (on) coverage.add(Number(key.split("/")[1]), Number(key.split("/")[0]), 0);
    const activations: number[] = [];
    for (const [at, shard, agent, delta] of during) {
      const us = (at - t0) * 1000;
      if (delta === 1) {
        coverage.add(shard, agent, us);
        activations.push(at);
      } else if (coverage.managersOf(shard) > 0) coverage.remove(shard, us);
    }
    const failoversS = faultTimes.flatMap((at) => {
      const next = activations.find((a) => a >= at);
      return next === undefined ? [] : [(next - at) / 1000];
    });
    return {
      scenario: scenario.name,
      durationS: scenario.duration / 1000,
      skipped,
      renewalsRefused,
      failoversS,
      failoverLagSeen,
      ...coverage.summary((endMs - t0) * 1000),
    };
  } finally {
    for (const child of children) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
