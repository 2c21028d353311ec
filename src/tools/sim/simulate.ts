import { seededRandom } from "../../runtime/random.js";
import type { CoveragePoint, CoverageSummary } from "./coverage.js";
import { layoutFleet, type FleetLayout } from "./fleet.js";
import { SimHost } from "./host.js";
import { runLegacyMode, type LegacyModeResult } from "./legacy-mode.js";
import { EventQueue } from "./queue.js";
import type { Fault, Scenario } from "./scenario.js";
import { runSettled } from "./keeper-scheduler.js";
import type { ShardFaults } from "./shard-faults.js";
import { CruiseBroken, runShardsMode, type ShardsModeResult } from "./shards-mode.js";
import { runShippedKeepers, shippedWarmUpUs } from "./shipped-keepers.js";

const MS = 1000;

/** A primitive fault on the simulator's clock, after repeats and rolling restarts are spelled out. */
type Step =
  | { atUs: number; kind: "crash" | "start" | "stop"; agent: number }
  | { atUs: number; kind: "pause"; agent: number; untilUs: number }
  | { atUs: number; kind: "cut"; agent: number; to: boolean; from: boolean }
  | { atUs: number; kind: "rate"; agent: number; rate: number }
  | { atUs: number; kind: "redis-restart"; downUs: number }
  /** the replica to be promoted at the next failover receives no write from here on */
  | { atUs: number; kind: "replica-stops" }
  | { atUs: number; kind: "redis-failover"; downUs: number };

/** The timeline as primitive steps, in time order (stable for equal times). */
export function stepsOf(scenario: Scenario, agents: string[]): Step[] {
  const index = new Map(agents.map((a, i) => [a, i]));
  const steps: Step[] = [];
  const occurrences = (fault: Fault) => {
    const repeat = "repeat" in fault && fault.repeat !== undefined ? fault.repeat : { every: 0, times: 1 };
    return Array.from({ length: repeat.times }, (_, j) => fault.at + j * repeat.every);
  };
  for (const fault of scenario.timeline) {
    for (const atMs of occurrences(fault)) {
      const atUs = atMs * MS;
      switch (fault.fault) {
        case "crash":
          steps.push({ atUs, kind: "crash", agent: index.get(fault.agent)! });
          break;
        case "restart":
          steps.push({ atUs, kind: "start", agent: index.get(fault.agent)! });
          break;
        case "pause":
          steps.push({ atUs, kind: "pause", agent: index.get(fault.agent)!, untilUs: atUs + fault.for * MS });
          break;
        case "partition": {
          const agent = index.get(fault.agent)!;
          const to = fault.direction !== "from-redis";
          const from = fault.direction !== "to-redis";
          steps.push({ atUs, kind: "cut", agent, to, from });
          steps.push({ atUs: atUs + fault.for * MS, kind: "cut", agent, to: false, from: false });
          break;
        }
        case "redis-restart":
          steps.push({ atUs, kind: "redis-restart", downUs: fault.down * MS });
          break;
        case "redis-failover":
          steps.push({ atUs: Math.max(0, atUs - fault.lag * MS), kind: "replica-stops" });
          steps.push({ atUs, kind: "redis-failover", downUs: fault.down * MS });
          break;
        case "clock-skew": {
          const agent = index.get(fault.agent)!;
          steps.push({ atUs, kind: "rate", agent, rate: fault.rate });
          if (fault.for !== undefined)
            steps.push({ atUs: atUs + fault.for * MS, kind: "rate", agent, rate: 1 });
          break;
        }
        case "rolling-restart":
          agents.forEach((_, agent) => {
            const stopAt = atUs + agent * fault.interval * MS;
            steps.push({ atUs: stopAt, kind: "stop", agent });
            steps.push({ atUs: stopAt + fault.downtime * MS, kind: "start", agent });
          });
          break;
      }
    }
  }
  return steps
    .map((s, i) => ({ s, i }))
    .sort((a, b) => a.s.atUs - b.s.atUs || a.i - b.i)
    .map(({ s }) => s);
}

export interface ModeReport extends CoverageSummary {
  /** fenced writes refused (shards: stale writers stopped; legacy: nothing fences) */
  staleWritesRefused: number | null;
  /** writes that passed fencing without being the live holder's: must be 0 */
  staleWritesAccepted: number | null;
  events: number;
  series: CoveragePoint[];
  /** who was active for what, from when to when (shards: per shard; legacy: per agent, with its node count) */
  activity: Array<{ lane: string; agent: string; fromS: number; toS: number; nodes?: number }>;
}

export interface SimulationReport {
  scenario: string;
  seed: number;
  durationS: number;
  nodes: number;
  shards: number;
  agents: number;
  leaseTtlMs: number;
  /** the scenario's faults, for the charts */
  faults: Array<{ atS: number; label: string }>;
  shardsMode: ModeReport;
  legacyMode: ModeReport;
}

/** How many lanes the timeline chart shows at most. */
const CHART_LANES = 24;
/** How many points each over-time series keeps at most. */
const SERIES_POINTS = 2000;

/** Thin a step series to about `max` points, keeping each bucket's worst values. */
function thin(series: CoveragePoint[], endUs: number, max: number): CoveragePoint[] {
  if (series.length <= max) return series;
  const bucketUs = endUs / max;
  const out: CoveragePoint[] = [];
  for (const p of series) {
    const last = out[out.length - 1];
    if (last !== undefined && Math.floor(last.atUs / bucketUs) === Math.floor(p.atUs / bucketUs)) {
      last.unmanaged = Math.max(last.unmanaged, p.unmanaged);
      last.doubleManaged = Math.max(last.doubleManaged, p.doubleManaged);
    } else out.push({ ...p });
  }
  return out;
}

/** How to run `simulate`. */
export interface SimulateOptions {
  /**
   * Run healthy holders' renews outside the queue (the default; see shards-mode.ts). False
   * queues every renew: slower, the same report — the reference the tests hold cruising to.
   */
  cruise?: boolean;
}

/**
 * Run a scenario under both modes, shards with leases and nova's ring, on the same fleet,
 * faults and seed. Deterministic: the same scenario gives the same report, byte for byte.
 */
export function simulate(
  scenario: Scenario,
  onProgress?: (fraction: number) => void,
  options: SimulateOptions = {},
): SimulationReport {
  const layout = layoutFleet(scenario, seededRandom(scenario.seed));
  const steps = stepsOf(scenario, layout.agents);
  const progress = progressOf(scenario, onProgress);

  let shards: { result: ShardsModeResult; events: number };
  try {
    shards = playShards(scenario, layout, steps, options.cruise ?? true, progress(0));
  } catch (error) {
    // A cruised renew would have been more than a renew: the run is not kept (see shards-mode.ts).
    if (!(error instanceof CruiseBroken)) throw error;
    shards = playShards(scenario, layout, steps, false, progress(0));
  }
  const legacy = playLegacy(scenario, layout, steps, progress(1));
  onProgress?.(1);
  return reportOf(scenario, layout, shards, legacy);
}

/**
 * `simulate` with the shards mode's keepers the shipped LeaseKeeper (shipped-keepers.ts)
 * instead of the simulator's own driver of the same rules: every poll and timer an event,
 * answers heard through promises. Slower; deterministic all the same.
 */
export async function simulateShippedKeepers(
  scenario: Scenario,
  onProgress?: (fraction: number) => void,
): Promise<SimulationReport> {
  const layout = layoutFleet(scenario, seededRandom(scenario.seed));
  const steps = stepsOf(scenario, layout.agents);
  const progress = progressOf(scenario, onProgress);
  const shards = await playShippedKeepers(scenario, layout, steps, progress(0));
  const legacy = playLegacy(scenario, layout, steps, progress(1));
  onProgress?.(1);
  return reportOf(scenario, layout, shards, legacy);
}

/** Progress of mode 0 (shards) or 1 (nova's ring) as a fraction of the whole run. */
function progressOf(
  scenario: Scenario,
  onProgress: ((fraction: number) => void) | undefined,
): (mode: number) => (nowUs: number) => void {
  const endUs = scenario.duration * MS;
  return (mode) => (nowUs) => onProgress?.((mode + Math.max(0, nowUs) / endUs) / 2);
}

/** The report of both modes' runs. */
function reportOf(
  scenario: Scenario,
  layout: FleetLayout,
  shards: { result: ShardsModeResult; events: number },
  legacy: { result: LegacyModeResult; events: number },
): SimulationReport {
  const endUs = scenario.duration * MS;
  const seconds = (us: number) => Math.round(us / 1000) / 1000;
  const shardsReport: ModeReport = {
    ...shards.result.coverage.summary(endUs),
    staleWritesRefused: shards.result.staleWritesRefused,
    staleWritesAccepted: shards.result.staleWritesAccepted,
    events: shards.events,
    series: thin(shards.result.coverage.series, endUs, SERIES_POINTS),
    activity: shards.result.spells
      .filter((s) => s.shard < CHART_LANES)
      .map((s) => ({
        lane: `shard-${s.shard}`,
        agent: layout.agents[s.agent]!,
        fromS: seconds(s.fromUs),
        toS: seconds(s.toUs ?? endUs),
      })),
  };
  const legacyReport: ModeReport = {
    ...legacy.result.coverage.summary(endUs),
    staleWritesRefused: null,
    staleWritesAccepted: null,
    events: legacy.events,
    series: thin(legacy.result.coverage.series, endUs, SERIES_POINTS),
    activity: legacy.result.spells
      .filter((s) => s.agent < CHART_LANES)
      .map((s) => ({
        lane: layout.agents[s.agent]!,
        agent: layout.agents[s.agent]!,
        fromS: seconds(s.fromUs),
        toS: seconds(s.toUs ?? endUs),
        nodes: s.nodes,
      })),
  };
  return {
    scenario: scenario.name,
    seed: scenario.seed,
    durationS: scenario.duration / 1000,
    nodes: scenario.fleet.nodes,
    shards: scenario.fleet.shards,
    agents: layout.agents.length,
    leaseTtlMs: scenario.fleet.lease_ttl_ms,
    faults: scenario.timeline.map((f) => ({
      atS: f.at / 1000,
      label: `${f.fault}${"agent" in f ? ` ${f.agent}` : ""}${"repeat" in f && f.repeat ? ` (×${f.repeat.times})` : ""}`,
    })),
    shardsMode: shardsReport,
    legacyMode: legacyReport,
  };
}

/** The timeline's steps as events on the shards mode's queue, ahead of the model's events at their instant. */
function scheduleShardFaults(queue: EventQueue, hosts: SimHost[], steps: Step[], faults: ShardFaults): void {
  for (const step of steps) {
    queue.atFirst(step.atUs, () => {
      const host = "agent" in step ? hosts[step.agent]! : undefined;
      switch (step.kind) {
        case "crash":
          return faults.crash(host!);
        case "stop":
          return faults.stop(host!);
        case "start":
          return faults.start(host!);
        case "pause":
          return faults.pause(host!, step.untilUs);
        case "cut":
          host!.cutTo = step.to;
          host!.cutFrom = step.from;
          return;
        case "rate":
          return faults.clockRate(host!, step.rate);
        case "redis-restart":
          return faults.redisRestart(step.downUs);
        case "replica-stops":
          return faults.replicaStops();
        case "redis-failover":
          return faults.redisFailover(step.downUs);
      }
    });
  }
}

/** Shards with leases: the timeline's faults on the shards mode's queue, run to the end. */
export function playShards(
  scenario: Scenario,
  layout: FleetLayout,
  steps: Step[],
  cruise: boolean,
  onProgress: (nowUs: number) => void,
): { result: ShardsModeResult; events: number } {
  const endUs = scenario.duration * MS;
  const queue = new EventQueue();
  const hosts = layout.agents.map((id, i) => new SimHost(i, id, queue));
  const shards = runShardsMode(
    scenario,
    layout,
    queue,
    seededRandom(scenario.seed ^ 0x5eed),
    hosts,
    steps.map((s) => s.atUs),
    cruise,
  );
  scheduleShardFaults(queue, hosts, steps, shards.faults);
  queue.runUntil(endUs, onProgress);
  shards.finish(endUs);
  return { result: shards.result, events: queue.processed };
}

/** Shards with leases kept by the shipped LeaseKeeper: warmed up before time 0, then the timeline's faults. */
async function playShippedKeepers(
  scenario: Scenario,
  layout: FleetLayout,
  steps: Step[],
  onProgress: (nowUs: number) => void,
): Promise<{ result: ShardsModeResult; events: number }> {
  // The run's clock reads `originUs` at the scenario's time 0 (the store's and the keepers'
  // clocks never run below 0, as real ones do not); the books are kept on the scenario's.
  const originUs = shippedWarmUpUs(scenario);
  const queue = new EventQueue();
  const hosts = layout.agents.map((id, i) => new SimHost(i, id, queue));
  const shifted = steps.map((s): Step =>
    s.kind === "pause"
      ? { ...s, atUs: s.atUs + originUs, untilUs: s.untilUs + originUs }
      : { ...s, atUs: s.atUs + originUs },
  );
  const shards = runShippedKeepers(
    scenario,
    layout,
    queue,
    seededRandom(scenario.seed ^ 0x5eed),
    hosts,
    originUs,
    shifted.map((s) => s.atUs),
  );
  scheduleShardFaults(queue, hosts, shifted, shards.faults);
  await runSettled(queue, originUs + scenario.duration * MS, (nowUs) => onProgress(nowUs - originUs));
  return { result: shards.result, events: queue.processed };
}

/** nova's ring: the same faults on its own queue. */
function playLegacy(
  scenario: Scenario,
  layout: FleetLayout,
  steps: Step[],
  onProgress: (nowUs: number) => void,
): { result: LegacyModeResult; events: number } {
  const queue = new EventQueue();
  const hosts = layout.agents.map((id, i) => new SimHost(i, id, queue));
  const legacy = runLegacyMode(
    layout,
    queue,
    seededRandom(scenario.seed ^ 0x1e6a),
    hosts,
    scenario.fleet.latency_ms * MS,
  );
  for (const step of steps) {
    queue.at(step.atUs, () => {
      if (!("agent" in step)) return; // Redis: nova keeps its services in its database
      const host = hosts[step.agent]!;
      switch (step.kind) {
        case "crash":
        case "stop":
          return legacy.faults.crash(host);
        case "start":
          return legacy.faults.start(host);
        case "pause":
          return legacy.faults.pause(host, step.untilUs);
        case "cut":
          return legacy.faults.cut(host, step.to, step.from);
        case "rate":
          return legacy.faults.clockRate(host, step.rate);
      }
    });
  }
  queue.runUntil(scenario.duration * MS, onProgress);
  return { result: legacy.result, events: queue.processed };
}
