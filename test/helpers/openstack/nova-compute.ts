import { expect } from "chai";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AgentProcess } from "../agent-process.js";
import { startBridge, type BridgeProcess } from "../bridge-process.js";
import { runShardbridge, SHARDBRIDGE } from "../cli.js";
import { dropEgressTables } from "../egress-tables.js";
import { running } from "../processes.js";
import type { BootingCloud, OpenStackCloud } from "./cloud.js";
import { readNovaLog, reportedAllAt } from "./nova-log.js";
import { openstackBin } from "./venv.js";

/**
 * For the nova-computes a test starts: their periodic tasks (the resource update among
 * them) start at once, not after nova's random delay of up to 60 s (periodic_fuzzy_delay),
 * which a freshly started service would otherwise add before its first periodic update.
 */
export const NO_FUZZY_DELAY = { OS_DEFAULT__PERIODIC_FUZZY_DELAY: "0" };

/** nova's `periodic_fuzzy_delay` default: without NO_FUZZY_DELAY, its periodics start up to this long after nova-compute. */
export const NOVA_PERIODIC_FUZZY_DELAY_S = 60;

/**
 * `shardbridge run --id HOST --shard SHARD -- nova-compute` in a session of its own (so a
 * test can stop or kill the whole group), with the cloud's nova.conf and a state folder of
 * the host's own, as on a machine of its own; `env` more of nova's options (OS_SECTION__OPTION)
 * or run's own, `args` more of run's flags.
 */
export function superviseNovaCompute(
  cloud: OpenStackCloud,
  bridge: BridgeProcess,
  host: string,
  shard: string,
  env: NodeJS.ProcessEnv = {},
  args: string[] = [],
): AgentProcess {
  const state = join(cloud.dir, host);
  mkdirSync(state, { recursive: true });
  return AgentProcess.spawnCommand(
    host,
    "setsid",
    [
      ...[SHARDBRIDGE.command, ...SHARDBRIDGE.args, "run", "--id", host, "--shard", shard],
      ...["--bridge", bridge.url, "--tokens-file", bridge.tokensFile, ...args, "--"],
      ...[openstackBin("nova-compute"), "--config-file", cloud.novaConf],
    ],
    { ...env, OS_DEFAULT__STATE_PATH: state },
  );
}

/** A nova-compute a supervisor started: its pid, lease token, when this process saw it start, its fenced endpoint. */
export interface NovaComputeChild {
  pid: number;
  token: string;
  /** ms of the epoch */
  startedAt: number;
  endpoint: string;
}

/**
 * A takeover's nova-compute start may take START_FACTOR times the shard's baseline start and
 * START_MARGIN_MS more: starts on this shared two-core machine spread about 2x between
 * files and runs, far less within one; a start held by a hung call waits a timeout (nova's
 * RPC or HTTP: 30-60 s), well beyond it.
 */
export const START_FACTOR = 2;
export const START_MARGIN_MS = 5000;

/**
 * The nova-computes of one shard of `nodes`, each under a `shardbridge run` supervisor of
 * its own (one host each, as on machines of their own), and what their records say: the
 * supervisors' JSON lines, nova-compute's log (each line carries its pid), the kernel's.
 */
export class SupervisedShard {
  supervisors: AgentProcess[] = [];
  /**
   * nova-compute's own start on this shard (started to every node reported, ms): the first
   * pair's, or one a test measured with what the shard holds since (instances).
   */
  baselineStartMs: number | null = null;

  constructor(
    private readonly cloud: OpenStackCloud,
    private readonly bridge: BridgeProcess,
    readonly shard: string,
    readonly nodes: string[],
    private readonly ttlMs: number,
    /** what every supervisor is given beyond the shard's flags: run's flags, its environment */
    private readonly run: { args?: string[]; env?: NodeJS.ProcessEnv } = {},
  ) {}

  /** A supervisor for `host`, started. */
  supervise(host: string): AgentProcess {
    const s = superviseNovaCompute(this.cloud, this.bridge, host, this.shard, this.run.env, this.run.args);
    this.supervisors.push(s);
    return s;
  }

  /** Every nova-compute pid any record names: a supervisor's child-started, or a line of nova's log. */
  novaComputePids(): Array<{ pid: number; label: string }> {
    const pids = new Map<number, string>();
    for (const s of this.supervisors)
      for (const e of s.events)
        if (e.ev === "child-started") pids.set(Number(e.pid), `${s.name} token ${e.token}`);
    for (const line of readNovaLog(this.cloud.novaComputeLog))
      if (!pids.has(line.pid)) pids.set(line.pid, "nova's log");
    return [...pids].map(([pid, label]) => ({ pid, label }));
  }

  /**
   * The nova-compute a supervisor started (its child-started record), and the fenced
   * endpoint it was given (its environment: the log never shows the lease's key).
   */
  async child(s: AgentProcess, withinMs: number, from = 0): Promise<NovaComputeChild> {
    const e = await s.waitFor((ev) => ev.ev === "child-started", withinMs, from);
    const environ = readFileSync(`/proc/${Number(e.pid)}/environ`, "utf8").split("\0");
    const variable = "OS_IRONIC__ENDPOINT_OVERRIDE=";
    const endpoint = environ.find((v) => v.startsWith(variable))?.slice(variable.length) ?? "";
    return { pid: Number(e.pid), token: String(e.token), startedAt: Date.now(), endpoint };
  }

  /** Until nova-compute `pid` has reported every node of the shard (nova's own log); when, in ms of the epoch. */
  async untilReported(pid: number, since: number, timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const at = reportedAllAt(readNovaLog(this.cloud.novaComputeLog), pid, this.nodes, since);
      if (at !== null) return at;
      if (performance.now() > deadline)
        throw new Error(
          `nova-compute ${pid} did not report all ${this.nodes.length} nodes within ${timeoutMs} ms`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * After a fault at `faultAt` (ms of the epoch): the standby's nova-compute, started within
   * the TTL and 2 s, and when it had reported every node (both times printed). Once the
   * shard has a baseline start, that report is held to it (see startBoundMs) unless
   * `unbounded` (a bench measures, it does not judge); `withinMs` only ends the wait.
   */
  async takeover(
    fault: string,
    standby: AgentProcess,
    faultAt: number,
    options: {
      withinMs?: number;
      /** the standby's records from which its new child is looked for (a supervisor that was active before has older ones) */
      from?: number;
      unbounded?: boolean;
    } = {},
  ): Promise<NovaComputeChild & { reportedAt: number }> {
    const next = await this.child(standby, this.ttlMs + 2000, options.from ?? 0);
    const reportedAt = await this.untilReported(next.pid, faultAt, options.withinMs ?? 120_000);
    console.log(
      `      ${fault}: the standby's nova-compute started ${next.startedAt - faultAt} ms after, ` +
        `had reported all ${this.nodes.length} nodes ${reportedAt - faultAt} ms after`,
    );
    const bound = this.startBoundMs();
    if (bound !== null && options.unbounded !== true)
      expect(
        reportedAt - next.startedAt,
        `${fault}: the new nova-compute's start to every node reported (ms), against ${START_FACTOR}x the ` +
          `shard's baseline start (${this.baselineStartMs} ms) + ${START_MARGIN_MS} ms`,
      ).to.be.at.most(bound);
    return { ...next, reportedAt };
  }

  /**
   * How long a nova-compute started by a takeover may take to report every node: its own
   * start, measured on this shard beforehand (baselineStartMs), with room for this shared
   * machine's spread. A start that needs more waited on something shardbridge put in its
   * path (the fenced endpoint, a process of the old host): the claim "up after one TTL and
   * nova-compute's own start" broken. Null until a baseline is measured.
   */
  startBoundMs(): number | null {
    return this.baselineStartMs === null ? null : START_FACTOR * this.baselineStartMs + START_MARGIN_MS;
  }

  /** Supervisors for `hosts` up; the active one's nova-compute has reported every node. */
  async pair(hosts: [string, string] = ["host-a", "host-b"]) {
    const [a, b] = hosts.map((h) => this.supervise(h)) as [AgentProcess, AgentProcess];
    const active = await Promise.race(
      [a, b].map((s) => s.waitFor((e) => e.ev === "child-started", 30_000).then(() => s)),
    );
    const child = await this.child(active, 1);
    const reportedAt = await this.untilReported(child.pid, 0, 90_000);
    this.baselineStartMs ??= reportedAt - child.startedAt;
    return { active, standby: active === a ? b : a, child, reportedAt };
  }

  /**
   * Kill every supervisor (woken first, if stopped) and wait up to 10 s for what they
   * started to be gone: the nova-computes still running then (none, when the supervisors
   * did their work).
   */
  async stopAll(): Promise<Array<{ pid: number; label: string }>> {
    const hosts = this.supervisors.map((s) => s.name);
    for (const s of this.supervisors) {
      try {
        process.kill(-s.child.pid!, "SIGCONT");
      } catch {
        // gone
      }
      await s.kill();
    }
    const deadline = performance.now() + 10_000;
    while (this.novaComputePids().some((p) => running(p.pid)) && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const left = this.novaComputePids().filter((p) => running(p.pid));
    this.supervisors = [];
    // A supervisor killed -9 leaves its egress fence's table: a test leaves nothing behind.
    if (this.run.args?.includes("--egress-fence")) dropEgressTables(this.shard, hosts);
    return left;
  }
}

/**
 * A shard as an operator runs it beside a booting cloud: a bridge fronting the cloud's
 * Ironic (its fenced endpoint) with the shard defined for host-a and host-b and Ironic's
 * nodes synced, and its supervisors run as the install steps set them: `--resend-preempted`
 * as the cloud's admin (the reboots a start of nova-compute preempts are sent again) and
 * `--egress-fence` (a host woken after its lease sends nothing). None started yet. The bridge is
 * stopped again if the sync fails.
 */
export async function resendingShard(
  cloud: BootingCloud,
  shard: string,
  nodes: string[],
  ttlMs: number,
  /** more of nova's options for its nova-computes (OS_SECTION__OPTION) */
  novaEnv: NodeJS.ProcessEnv = {},
): Promise<{ bridge: BridgeProcess; shard: SupervisedShard }> {
  const bridge = await startBridge({
    shards: [{ name: shard, lease_ttl_ms: ttlMs }],
    agents: ["host-a", "host-b"],
    env: cloud.bridgeEnv,
    args: ["--ironic", cloud.ironic],
  });
  const sync = await runShardbridge(
    ["ironic-sync", "--ironic", cloud.ironic, "--bridge", bridge.url, "--token", bridge.tokenFor("admin")],
    cloud.bridgeEnv,
  );
  if (sync.status !== 0) {
    await bridge.stop();
    throw new Error(`ironic-sync exited ${sync.status}: ${sync.stderr}`);
  }
  const supervised = new SupervisedShard(cloud, bridge, shard, nodes, ttlMs, {
    args: ["--resend-preempted", "--nova-api", cloud.compute.url, "--egress-fence"],
    env: { ...cloud.keystone.adminOpenrc(), ...novaEnv },
  });
  return { bridge, shard: supervised };
}
