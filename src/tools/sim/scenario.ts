import { findNodeAtLocation, parse, parseTree, printParseErrorCode, type ParseError } from "jsonc-parser";
import { z } from "zod";
import { LeaseTtlMs, renewIntervalMs } from "../../core/lease/bounds.js";
import { AgentId } from "../../core/names.js";

/**
 * A failover scenario: a fleet and a timeline of faults, as a JSON file (comments
 * allowed). Times are "90s", "2m", "1h30m", "250ms" or a number of milliseconds.
 */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** "1h30m" -> 5_400_000; a bare number is milliseconds. */
export const Duration = z
  .union([z.number().nonnegative({ error: "must not be negative" }), z.string()], {
    error: 'must be a duration: "90s", "2m", "1h30m", "250ms" or milliseconds',
  })
  .transform((value, ctx) => {
    if (typeof value === "number") return Math.round(value);
    const parts = [...value.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
    if (parts.length === 0 || parts.map((p) => p[0]).join("") !== value) {
      ctx.addIssue({
        code: "custom",
        message: `"${value}" is not a duration ("90s", "2m", "1h30m", "250ms")`,
      });
      return z.NEVER;
    }
    return Math.round(parts.reduce((ms, [, n, unit]) => ms + Number(n) * UNIT_MS[unit!]!, 0));
  });

const Repeat = z.strictObject({
  every: Duration,
  times: z.number().int().min(1).max(10_000),
});

const AgentFault = { agent: AgentId, repeat: Repeat.optional() };

/** The faults a timeline may hold. */
export const Fault = z.discriminatedUnion(
  "fault",
  [
    /** kill -9: the agent stops at once, holding whatever it held */
    z.strictObject({ at: Duration, fault: z.literal("crash"), ...AgentFault }),
    /** start a crashed agent again (a running one is killed and started) */
    z.strictObject({ at: Duration, fault: z.literal("restart"), ...AgentFault }),
    /** SIGSTOP for `for`, then SIGCONT (or a long GC pause); an agent that is not running is not frozen */
    z.strictObject({ at: Duration, fault: z.literal("pause"), for: Duration, ...AgentFault }),
    /** the agent and Redis cannot reach each other: both ways, or one way */
    z.strictObject({
      at: Duration,
      fault: z.literal("partition"),
      for: Duration,
      direction: z.enum(["both", "to-redis", "from-redis"]).default("both"),
      ...AgentFault,
    }),
    /** Redis restarts without persistence: every key is lost; it answers nothing for `down` */
    z.strictObject({
      at: Duration,
      fault: z.literal("redis-restart"),
      down: Duration.default(1000),
      repeat: Repeat.optional(),
    }),
    /**
     * Redis fails over: the master is lost, and a replica that lags `lag` behind it — it
     * lacks every write of the last `lag` — is promoted, under a new replication id;
     * clients reach it `down` after the master was lost
     */
    z.strictObject({
      at: Duration,
      fault: z.literal("redis-failover"),
      lag: Duration.default(0),
      down: Duration.default(1000),
      repeat: Repeat.optional(),
    }),
    /** the agent's clock runs at `rate` (0.5 = half speed) from then on, or for `for` */
    z.strictObject({
      at: Duration,
      fault: z.literal("clock-skew"),
      rate: z.number().min(0.1).max(10),
      for: Duration.optional(),
      ...AgentFault,
    }),
    /** every agent in turn: SIGTERM (hands its leases back), down for `downtime`, started; next after `interval` */
    z.strictObject({
      at: Duration,
      fault: z.literal("rolling-restart"),
      interval: Duration,
      downtime: Duration.default(5000),
    }),
  ],
  {
    error:
      "unknown fault: one of crash, restart, pause, partition, redis-restart, redis-failover, clock-skew, rolling-restart",
  },
);
export type Fault = z.output<typeof Fault>;

export const Fleet = z.strictObject({
  nodes: z.number().int().min(1).max(10_000_000),
  shards: z.number().int().min(1).max(100_000),
  /** agents that may serve each shard: one active, the rest passive */
  agents_per_shard: z.number().int().min(1).max(100).default(2),
  /** compute agents in the fleet (default shards × agents_per_shard: each agent serves one shard) */
  agents: z.number().int().min(1).max(100_000).optional(),
  /** their ids, when the scenario names agents (default compute-0, compute-1, …) */
  agent_ids: z.array(AgentId).optional(),
  lease_ttl_ms: LeaseTtlMs.default(6000),
  /** one-way network delay between an agent and Redis */
  latency_ms: z.number().min(0).max(10_000).default(0.5),
  /** how often an active agent makes a fenced write (nova's periodic work) */
  write_interval_ms: z.number().int().min(100).max(3_600_000).default(5000),
  /**
   * time from an agent checking that it may act to its write reaching Redis: a pause in
   * between (GC, SIGSTOP) makes it a stale write, which fencing must refuse
   */
  write_work_ms: z.number().min(0).max(60_000).default(20),
  /** the reference agent's standby poll (jittered to 50–100 %), where standbys do not wait */
  standby_poll_ms: z.number().int().min(10).max(60_000).default(500),
  /**
   * how long a standby's acquire waits at the bridge (`wait_ms`, as the reference agent's
   * 30,000); 0, the default here: standbys poll, as they did before waiting acquires
   */
  standby_wait_ms: z.number().int().min(0).max(30_000).default(0),
});

export const Scenario = z
  .strictObject({
    name: z.string().min(1).max(200),
    description: z.string().max(2000).default(""),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .default(1),
    duration: Duration,
    fleet: Fleet,
    timeline: z.array(Fault).max(100_000).default([]),
  })
  .superRefine((scenario, ctx) => {
    const { fleet } = scenario;
    const agents = agentCount(fleet);
    if (fleet.agents_per_shard > agents)
      ctx.addIssue({
        code: "custom",
        path: ["fleet", "agents_per_shard"],
        message: `${fleet.agents_per_shard} agents per shard, but the fleet has ${agents} agents`,
      });
    if (fleet.agent_ids !== undefined) {
      if (agents > fleet.agent_ids.length)
        ctx.addIssue({
          code: "custom",
          path: ["fleet", "agents"],
          message: `${agents} agents but only ${fleet.agent_ids.length} ids in agent_ids`,
        });
      const seen = new Set<string>();
      fleet.agent_ids.forEach((id, i) => {
        if (seen.has(id.toLowerCase()))
          ctx.addIssue({ code: "custom", path: ["fleet", "agent_ids", i], message: `${id} is named twice` });
        seen.add(id.toLowerCase());
      });
    }
    const ids = new Set(agentIdsOf(fleet));
    let last = -1;
    scenario.timeline.forEach((fault, i) => {
      if (fault.at < last)
        ctx.addIssue({
          code: "custom",
          path: ["timeline", i, "at"],
          message: `out of order: ${fault.at} ms comes after ${last} ms (list faults by time)`,
        });
      last = Math.max(last, fault.at);
      if (fault.at > scenario.duration)
        ctx.addIssue({
          code: "custom",
          path: ["timeline", i, "at"],
          message: `after the end of the scenario (${scenario.duration} ms)`,
        });
      if ("agent" in fault && !ids.has(fault.agent))
        ctx.addIssue({
          code: "custom",
          path: ["timeline", i, "agent"],
          message: `${fault.agent} is not an agent of this fleet (${[...ids].slice(0, 3).join(", ")}, …)`,
        });
    });
    // The replica promoted at a failover follows the master that fails: the one promoted
    // at the failover before. Its lag cannot reach back past that failover.
    const failovers = scenario.timeline
      .flatMap((fault, i) =>
        fault.fault !== "redis-failover"
          ? []
          : Array.from({ length: fault.repeat?.times ?? 1 }, (_, j) => ({
              i,
              at: fault.at + j * (fault.repeat?.every ?? 0),
              lag: fault.lag,
            })),
      )
      .sort((a, b) => a.at - b.at);
    failovers.forEach((failover, n) => {
      const before = failovers[n - 1];
      if (before !== undefined && failover.at - failover.lag <= before.at)
        ctx.addIssue({
          code: "custom",
          path: ["timeline", failover.i, "lag"],
          message: `a lag of ${failover.lag} ms at ${failover.at} ms reaches back past the redis-failover at ${before.at} ms`,
        });
    });
  });
export type Scenario = z.output<typeof Scenario>;

/** The fleet's timings a keeper driver runs on, in the simulator's microseconds. */
export interface FleetTimesUs {
  /** a lease's TTL (ms, as agents ask for it) */
  ttlMs: number;
  /** a holder's renews (TTL/3) */
  intervalUs: number;
  latencyUs: number;
  pollUs: number;
  writeUs: number;
  workUs: number;
}

export function fleetTimesUs({ fleet }: Scenario): FleetTimesUs {
  return {
    ttlMs: fleet.lease_ttl_ms,
    intervalUs: renewIntervalMs(fleet.lease_ttl_ms) * 1000,
    latencyUs: fleet.latency_ms * 1000,
    pollUs: fleet.standby_poll_ms * 1000,
    writeUs: fleet.write_interval_ms * 1000,
    workUs: fleet.write_work_ms * 1000,
  };
}

/** How many agents the fleet has: as given, else as many as ids given, else shards × agents_per_shard. */
function agentCount(fleet: z.output<typeof Fleet>): number {
  return fleet.agents ?? fleet.agent_ids?.length ?? fleet.shards * fleet.agents_per_shard;
}

/** The fleet's agent ids, in order. */
export function agentIdsOf(fleet: z.output<typeof Fleet>): string[] {
  const count = agentCount(fleet);
  return fleet.agent_ids?.slice(0, count) ?? Array.from({ length: count }, (_, i) => `compute-${i}`);
}

/** A scenario file that cannot be used: each problem with its line, field and reason. */
export class ScenarioError extends Error {
  constructor(
    readonly file: string,
    readonly problems: Array<{ line: number; field: string; reason: string }>,
  ) {
    super(problems.map((p) => `${file}:${p.line}: ${p.field}: ${p.reason}`).join("\n"));
    this.name = "ScenarioError";
  }
}

const lineAt = (text: string, offset: number): number => text.slice(0, offset).split("\n").length;

/** Parse and validate a scenario file's text; errors name the line of each problem. */
export function parseScenario(text: string, file = "scenario"): Scenario {
  const syntax: ParseError[] = [];
  const raw: unknown = parse(text, syntax, { allowTrailingComma: true });
  if (syntax.length > 0) {
    throw new ScenarioError(
      file,
      syntax.slice(0, 10).map((e) => ({
        line: lineAt(text, e.offset),
        field: "(syntax)",
        reason: printParseErrorCode(e.error),
      })),
    );
  }
  const result = Scenario.safeParse(raw);
  if (result.success) return result.data;
  const tree = parseTree(text)!;
  throw new ScenarioError(
    file,
    result.error.issues.slice(0, 20).map((issue) => {
      // The deepest part of the path that exists in the file says where to look.
      let path = issue.path.map((p) => (typeof p === "symbol" ? String(p) : p));
      let node = findNodeAtLocation(tree, path);
      while (node === undefined && path.length > 0) {
        path = path.slice(0, -1);
        node = findNodeAtLocation(tree, path);
      }
      const field =
        issue.path.length === 0
          ? "(root)"
          : issue.path
              .map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`))
              .join("");
      return { line: lineAt(text, node?.offset ?? 0), field, reason: issue.message };
    }),
  );
}
