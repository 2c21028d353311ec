import { setTimeout as sleep } from "node:timers/promises";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { SHARDBRIDGE } from "../helpers/cli.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { startEchoServer, type EchoServer } from "./echo-server.js";
import { KeepAlivePool } from "./keepalive-client.js";
import { processCpuS } from "./load.js";
import { percentile, printTable } from "./stats.js";
import { nodeUuid } from "./uuids.js";

/**
 * `make bench scale`: a million nodes on one bridge (#32). 1,000,000 nodes in 10,000
 * shards of 100, an active and a standby agent per shard (20,000 agents), one private
 * redis-server, the bridge as operators run it (`shardbridge serve --store redis://…`, its
 * own process), and every agent simulated in this one process over HTTP (keepalive-client.ts:
 * a pool of keep-alive sockets per kind of traffic, and one socket per waiting standby).
 *
 * Each agent holds its own agent token (a tokens file of 20,000 agents and the admin): the
 * bridge then checks every request as it would a real fleet's — the agent acting as itself,
 * the fencing tokens shown to their holder only — where the admin token acting for all of
 * them would skip those checks. The shards have no definition: the nodes carry them as
 * shard keys, as Ironic's do, so every acquire also asks the store whether a node carries
 * the shard (docs/API.md "Which shards"), and the TTL is the default, 6 s.
 *
 * The agents do what the reference agent does: the active renews every TTL/3 after its
 * last renew sent and stops acting 2/3 TTL after the last renew it sent that succeeded —
 * a renew refused, or answered after that, is a lease lost (it then stands by); every
 * agent heartbeats every 10 s declaring its shard; the actives read their node list (as
 * nova-compute's resource tracker does, every 60 s each by default). Two phases in one
 * run, one fleet: standbys that wait (`wait_ms` 30000, asked again at once when
 * answered), then standbys that poll (an acquire every 250–500 ms, jittered: the client
 * before #32) — in that order, so that a bridge the polling saturates leaves no backlog
 * to the other phase. In each phase, after a warm-up, one crash failover (an active stops right
 * after a successful renew: its standby's grant minus the TTL after that renew's send) and
 * one handover (an active releases: the standby's grant after the release's answer).
 * Then, in the same run, the floor: the bridge stopped, the same fleet (standbys waiting)
 * against the least a lease service could do on this machine — node:http doing one script
 * call on the same Redis per lease write and heartbeat, and answering every node list
 * with the bytes the bridge answered one (echo-server.ts) — so that each figure reads
 * against what any Node service gets here under the same fleet.
 * Every time is from this process's own clock; nothing is asserted.
 *
 * Smaller runs: BENCH_SCALE_NODES, BENCH_SCALE_SHARDS, BENCH_SCALE_SECONDS (each phase's
 * measured window), BENCH_SCALE_WARMUP_SECONDS, BENCH_SCALE_LISTS_PER_S. A look inside the
 * bridge: BENCH_BRIDGE_NODE_FLAGS (node's flags for it, e.g. --cpu-prof).
 */
const NODES = Number(process.env.BENCH_SCALE_NODES ?? 1_000_000);
const SHARDS = Number(process.env.BENCH_SCALE_SHARDS ?? 10_000);
const SECONDS = Number(process.env.BENCH_SCALE_SECONDS ?? 45);
const WARMUP_S = Number(process.env.BENCH_SCALE_WARMUP_SECONDS ?? 12);
/** nova-compute's resource tracker reads its nodes every 60 s: one list per active a minute */
const LISTS_PER_S = Number(process.env.BENCH_SCALE_LISTS_PER_S ?? SHARDS / 60);
const TTL_MS = 6000; // the default TTL of a shard without a definition
const RENEW_EVERY_MS = TTL_MS / 3;
const STOP_AFTER_MS = (2 * TTL_MS) / 3;
const HEARTBEAT_MS = 10_000;
const POLL_MIN_MS = 250;
const POLL_MAX_MS = 500;
const WAIT_MS = 30_000;
const BULK = 20_000; // the API's most per request
/** sockets per pool; the waiting standbys have one each */
const RENEW_SOCKETS = 2048;
const POLL_SOCKETS = 2048;
const OTHER_SOCKETS = 256;
const REQUEST_TIMEOUT_MS = 20_000;
const LOOP_RESOLUTION_MS = 10;
/** The node options the bridge's systemd unit sets (examples/systemd/shardbridge.service). */
const BRIDGE_NODE_OPTIONS =
  /^Environment=NODE_OPTIONS=(.*)$/m.exec(
    readFileSync(new URL("../../examples/systemd/shardbridge.service", import.meta.url), "utf8"),
  )?.[1] ?? "";

const shardName = (s: number) => `rack-${String(s).padStart(5, "0")}`;
const agentName = (s: number, side: 0 | 1) =>
  `compute-${String(s).padStart(5, "0")}-${side === 0 ? "a" : "b"}`;

// --- HTTP -------------------------------------------------------------------------

let base = { host: "127.0.0.1", port: 0 };
const server = () => base;
const pools = {
  renew: new KeepAlivePool(server, RENEW_SOCKETS, REQUEST_TIMEOUT_MS),
  poll: new KeepAlivePool(server, POLL_SOCKETS, REQUEST_TIMEOUT_MS),
  other: new KeepAlivePool(server, OTHER_SOCKETS, REQUEST_TIMEOUT_MS),
  // a socket per waiting standby, kept between its waits
  wait: new KeepAlivePool(server, Infinity, REQUEST_TIMEOUT_MS),
};

// --- what a phase records ---------------------------------------------------------

type Mode = "polling" | "waiting";

class Phase {
  recording = false;
  startedAt = 0;
  endedAt = 0;
  renewMs: number[] = [];
  /** when each renew in renewMs was answered (this process's clock) */
  renewDoneAt: number[] = [];
  listMs: number[] = [];
  heartbeatMs: number[] = [];
  /** how late this process sent each renew after its time (its own event loop's delay) */
  renewSendLagMs: number[] = [];
  /** the most requests waiting for a socket in this process's pools, sampled every second */
  queuedMax = 0;
  listsShort = 0;
  standbyRequests = 0;
  /** grants to a standby in the window: every change of holder */
  leaseChanges = 0;
  lostRefused = 0;
  lostLate = 0;
  errors = new Map<string, number>();
  rssMaxKb = 0;
  rssEndKb = 0;
  redisUsedMemory = 0;
  redisCommands = 0;
  /** connections the kernel dropped, the bridge's accept queue full (machine-wide: nothing else listens much here) */
  listenOverflows = 0;
  /** CPU seconds in the window: the server (the bridge, or the floor), redis-server, this process */
  cpu = { server: 0, redis: 0, load: 0 };
  loopP99Ms = 0;
  loopMaxMs = 0;
  crash: { failoverMs: number; standbyRequests: number } | null = null;
  handover: { ms: number; standbyRequests: number } | null = null;

  constructor(
    readonly mode: Mode,
    /** the bridge, or the floor: the same fleet against the least a lease service does (echo-server.ts) */
    readonly target: "bridge" | "floor" = "bridge",
  ) {}

  error(what: string): void {
    if (this.recording) this.errors.set(what, (this.errors.get(what) ?? 0) + 1);
  }

  get seconds(): number {
    return (this.endedAt - this.startedAt) / 1000;
  }
}

// --- the simulated fleet ----------------------------------------------------------

interface Probe {
  /** the agent to crash after its next successful renew, or that releases */
  kind: "crash" | "handover";
  shard: number;
  /** when the lease could end (crash: the last renew's send + TTL) or was released (its answer) */
  from: number;
  standbyRequests: number;
  done: (ms: number, standbyRequests: number) => void;
}

class Fleet {
  phase = new Phase("polling");
  stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** per shard and side: the fencing token while active, null while standing by, undefined while down */
  readonly token: Array<[number | null | undefined, number | null | undefined]>;
  /** when each active's last successful renew (or its grant's start) was sent */
  private readonly lastOk: Array<[number, number]>;
  private readonly renewTimer: Array<[NodeJS.Timeout | undefined, NodeJS.Timeout | undefined]>;
  private readonly renewDue: Array<[number, number]>;
  private readonly crashAfterRenew = new Set<string>();
  private probes = new Map<number, Probe>();

  constructor(
    readonly bearer: (agent: string) => string,
    readonly shards: number,
  ) {
    this.token = Array.from({ length: shards }, () => [null, null]);
    this.lastOk = Array.from({ length: shards }, () => [0, 0]);
    this.renewTimer = Array.from({ length: shards }, () => [undefined, undefined]);
    this.renewDue = Array.from({ length: shards }, () => [0, 0]);
  }

  private later(ms: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  /** The first holder of every shard (side a), once the store grants leases. */
  async takeFirstLeases(): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        for (let s = next++; s < this.shards; s = next++) {
          for (;;) {
            const agent = agentName(s, 0);
            const out = await pools.renew.request(
              "POST",
              `/v1/shards/${shardName(s)}/lease`,
              this.bearer(agent),
              JSON.stringify({ agent }),
            );
            if (out.status === 200) {
              this.becomeActive(s, 0, (JSON.parse(out.body) as { token: number }).token, out.sentAt);
              break;
            }
            const refusal = JSON.parse(out.body) as {
              errors: Array<{ code: string; retry_after_ms?: number }>;
            };
            if (refusal.errors[0]?.code !== "shardbridge.lease.recovering")
              throw new Error(`first acquire of ${shardName(s)}: ${out.status} ${out.body}`);
            await new Promise((r) => setTimeout(r, refusal.errors[0]!.retry_after_ms ?? 100));
          }
        }
      }),
    );
  }

  /** Heartbeats for everyone, spread over one interval; standbys start asking. */
  start(): void {
    for (let s = 0; s < this.shards; s++) {
      for (const side of [0, 1] as const)
        this.later(Math.random() * HEARTBEAT_MS, () => this.heartbeat(s, side));
      this.later(Math.random() * POLL_MAX_MS, () => this.standby(s, 1));
    }
  }

  private heartbeat(s: number, side: 0 | 1): void {
    if (this.token[s]![side] === undefined) return; // down; heartbeats again when it comes back
    const agent = agentName(s, side);
    const phase = this.phase;
    pools.other
      .request(
        "POST",
        `/v1/agents/${agent}/heartbeat`,
        this.bearer(agent),
        JSON.stringify({ shards: [shardName(s)] }),
      )
      .then(
        (out) => {
          if (out.status !== 204 && out.status !== 200) phase.error(`heartbeat ${out.status}`);
          else if (phase.recording) phase.heartbeatMs.push(out.doneAt - out.sentAt);
        },
        (error: unknown) => phase.error(`heartbeat: ${String(error)}`),
      );
    this.later(HEARTBEAT_MS, () => this.heartbeat(s, side));
  }

  private becomeActive(s: number, side: 0 | 1, token: number, startedAt: number): void {
    this.token[s]![side] = token;
    this.lastOk[s]![side] = startedAt;
    this.scheduleRenew(s, side, startedAt + RENEW_EVERY_MS);
  }

  private scheduleRenew(s: number, side: 0 | 1, at: number): void {
    this.renewDue[s]![side] = at;
    this.renewTimer[s]![side] = this.later(Math.max(0, at - performance.now()), () => this.renew(s, side));
  }

  /** The lease is lost (or given up): stand by again, after `restartMs` when the agent went down. */
  private loseLease(s: number, side: 0 | 1): void {
    clearTimeout(this.renewTimer[s]![side]);
    this.token[s]![side] = null;
    this.later(POLL_MIN_MS, () => this.standby(s, side));
  }

  private renew(s: number, side: 0 | 1): void {
    const token = this.token[s]![side];
    if (typeof token !== "number") return;
    const agent = agentName(s, side);
    const phase = this.phase;
    const sentAt = performance.now();
    if (phase.recording) phase.renewSendLagMs.push(sentAt - this.renewDue[s]![side]);
    const deadline = this.lastOk[s]![side] + STOP_AFTER_MS;
    const lost = (late: boolean) => {
      if (phase.recording) {
        if (late) phase.lostLate++;
        else phase.lostRefused++;
      }
      this.loseLease(s, side);
    };
    pools.renew
      .request(
        "POST",
        `/v1/shards/${shardName(s)}/lease`,
        this.bearer(agent),
        JSON.stringify({ agent, token }),
      )
      .then(
        (out) => {
          if (this.token[s]![side] !== token) return; // released or crashed meanwhile
          if (phase.recording) {
            phase.renewMs.push(out.doneAt - out.sentAt);
            phase.renewDoneAt.push(out.doneAt);
          }
          if (out.doneAt > deadline) return lost(true); // the agent stopped acting at the deadline
          if (out.status === 409) return lost(false);
          if (out.status !== 200) {
            phase.error(`renew ${out.status}`);
            return this.scheduleRenew(s, side, performance.now() + 100); // the deadline decides
          }
          this.lastOk[s]![side] = sentAt;
          const key = `${s}/${side}`;
          if (this.crashAfterRenew.delete(key) && this.probes.has(s)) return this.crash(s, side, sentAt);
          this.scheduleRenew(s, side, sentAt + RENEW_EVERY_MS);
        },
        (error: unknown) => {
          if (this.token[s]![side] !== token) return;
          phase.error(`renew: ${String(error)}`);
          if (performance.now() > deadline) return lost(true);
          this.scheduleRenew(s, side, performance.now() + 100);
        },
      );
  }

  private standby(s: number, side: 0 | 1): void {
    if (this.token[s]![side] !== null) return; // active, or down
    const agent = agentName(s, side);
    const phase = this.phase;
    const waiting = phase.mode === "waiting";
    if (phase.recording) phase.standbyRequests++;
    const probe = this.probes.get(s);
    if (probe !== undefined) probe.standbyRequests++;
    (waiting ? pools.wait : pools.poll)
      .request(
        "POST",
        `/v1/shards/${shardName(s)}/lease`,
        this.bearer(agent),
        JSON.stringify(waiting ? { agent, wait_ms: WAIT_MS } : { agent }),
        waiting ? WAIT_MS + REQUEST_TIMEOUT_MS : REQUEST_TIMEOUT_MS,
      )
      .then(
        (out) => {
          if (this.token[s]![side] !== null) return;
          if (out.status === 200) {
            const grant = JSON.parse(out.body) as { token: number; waited_ms?: number };
            if (this.phase.recording) this.phase.leaseChanges++;
            this.becomeActive(s, side, grant.token, out.sentAt + (grant.waited_ms ?? 0));
            const probe = this.probes.get(s);
            if (probe !== undefined) {
              this.probes.delete(s);
              probe.done(out.doneAt - probe.from, probe.standbyRequests);
            }
            return;
          }
          if (out.status !== 409) phase.error(`acquire ${out.status}`);
          // polling: the next poll 250-500 ms after the answer; waiting: ask again at once
          this.later(
            waiting && out.status === 409 ? 0 : POLL_MIN_MS + Math.random() * (POLL_MAX_MS - POLL_MIN_MS),
            () => this.standby(s, side),
          );
        },
        (error: unknown) => {
          phase.error(`acquire: ${String(error)}`);
          this.later(POLL_MIN_MS, () => this.standby(s, side));
        },
      );
  }

  /** The side of shard `s` holding its lease now, if one does. */
  activeSide(s: number): 0 | 1 | null {
    return typeof this.token[s]![0] === "number" ? 0 : typeof this.token[s]![1] === "number" ? 1 : null;
  }

  /** Node lists at `perSecond`, each by the active of a random shard, until stopped. */
  listNodes(perSecond: number): void {
    const tickMs = 50;
    let owed = 0;
    const tick = () => {
      owed += (perSecond * tickMs) / 1000;
      for (; owed >= 1; owed--) {
        const s = Math.floor(Math.random() * this.shards);
        const side = this.activeSide(s);
        if (side === null) continue;
        const agent = agentName(s, side);
        const phase = this.phase;
        pools.other
          .request("GET", `/v1/agents/${agent}/nodes?token=${this.token[s]![side]}`, this.bearer(agent))
          .then(
            (out) => {
              if (out.status !== 200) return phase.error(`node list ${out.status}`);
              if (!phase.recording) return;
              phase.listMs.push(out.doneAt - out.sentAt);
              const { nodes } = JSON.parse(out.body) as { nodes: Array<{ via: string }> };
              if (nodes.filter((n) => n.via === "lease").length !== NODES / SHARDS) phase.listsShort++;
            },
            (error: unknown) => phase.error(`node list: ${String(error)}`),
          );
      }
      this.later(tickMs, tick);
    };
    tick();
  }

  /** A shard whose lease one side holds while the other stands by, and no probe watches. */
  private steadyShard(): number {
    const from = Math.floor(Math.random() * this.shards);
    for (let i = 0; i < this.shards; i++) {
      const s = (from + i) % this.shards;
      const side = this.activeSide(s);
      if (side !== null && this.token[s]![side === 0 ? 1 : 0] === null && !this.probes.has(s)) return s;
    }
    throw new Error("no shard has a holder and a standby");
  }

  /** Crash an active right after its next successful renew; resolves with its standby's grant. */
  crashOne(): Promise<{ failoverMs: number; standbyRequests: number }> {
    const s = this.steadyShard();
    const side = this.activeSide(s)!;
    return new Promise((resolve) => {
      // Should the active lose its lease first, or nobody be granted: no figure.
      const giveUp = this.later(4 * TTL_MS + REQUEST_TIMEOUT_MS, () => {
        this.probes.delete(s);
        this.crashAfterRenew.delete(`${s}/${side}`);
        resolve({ failoverMs: NaN, standbyRequests: NaN });
      });
      this.probes.set(s, {
        kind: "crash",
        shard: s,
        from: Infinity, // set at the crash
        standbyRequests: 0,
        done: (ms, standbyRequests) => {
          // granted before the crash (the active lost its lease first): no figure
          clearTimeout(giveUp);
          this.crashAfterRenew.delete(`${s}/${side}`);
          resolve(
            Number.isFinite(ms)
              ? { failoverMs: ms, standbyRequests }
              : { failoverMs: NaN, standbyRequests: NaN },
          );
        },
      });
      this.crashAfterRenew.add(`${s}/${side}`);
    });
  }

  private crash(s: number, side: 0 | 1, lastRenewSentAt: number): void {
    clearTimeout(this.renewTimer[s]![side]);
    this.token[s]![side] = undefined; // down: no renews, heartbeats or acquires
    const probe = this.probes.get(s)!;
    probe.from = lastRenewSentAt + TTL_MS;
    probe.standbyRequests = 0;
    // back as a standby once its standby holds the lease
    const back = () => {
      if (this.probes.has(s)) return this.later(500, back);
      this.token[s]![side] = null;
      this.later(0, () => this.heartbeat(s, side));
      this.later(POLL_MIN_MS, () => this.standby(s, side));
    };
    this.later(TTL_MS, back);
  }

  /** An active releases its lease; resolves with its standby's grant after the release's answer. */
  async handoverOne(): Promise<{ ms: number; standbyRequests: number }> {
    const s = this.steadyShard();
    const side = this.activeSide(s)!;
    const token = this.token[s]![side] as number;
    const agent = agentName(s, side);
    clearTimeout(this.renewTimer[s]![side]);
    this.token[s]![side] = undefined; // stopping: acts no more, asks nothing until it is back
    let resolveGrant: (v: { ms: number; standbyRequests: number }) => void = () => undefined;
    const granted = new Promise<{ ms: number; standbyRequests: number }>((r) => (resolveGrant = r));
    const probe: Probe = {
      kind: "handover",
      shard: s,
      from: Infinity,
      standbyRequests: 0,
      done: (ms, standbyRequests) => resolveGrant({ ms, standbyRequests }),
    };
    this.probes.set(s, probe);
    const out = await pools.renew.request(
      "DELETE",
      `/v1/shards/${shardName(s)}/lease`,
      this.bearer(agent),
      JSON.stringify({ agent, token }),
    );
    if (out.status !== 204) throw new Error(`release of ${shardName(s)}: ${out.status} ${out.body}`);
    // The standby's grant may be answered before the release is: the figure is then negative.
    probe.from = out.doneAt;
    probe.standbyRequests = 0;
    const result = await Promise.race([
      granted,
      sleep(TTL_MS + REQUEST_TIMEOUT_MS).then(() => {
        this.probes.delete(s);
        return { ms: NaN, standbyRequests: NaN };
      }),
    ]);
    this.token[s]![side] = null; // back, as a standby
    this.later(0, () => this.heartbeat(s, side));
    this.later(POLL_MIN_MS, () => this.standby(s, side));
    return result;
  }
}

// --- machine readings -------------------------------------------------------------

function rssKb(pid: number | undefined): number {
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
  } catch {
    return NaN;
  }
}

function openFilesLimit(): number {
  const line = /^Max open files\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
  return line?.[1] === "unlimited" ? Infinity : Number(line?.[1]);
}

/**
 * A number from redis-server's INFO: `used_memory` (memory), or `total_commands_processed`
 * (stats: each script counts once, and each call inside it once more).
 */
async function redisInfo(
  redis: TestRedisServer,
  section: "memory" | "stats",
  field: string,
): Promise<number> {
  const admin = redis.client();
  try {
    return Number(new RegExp(`^${field}:(\\d+)`, "m").exec(await admin.info(section))?.[1]);
  } finally {
    admin.disconnect();
  }
}
const usedMemory = (redis: TestRedisServer) => redisInfo(redis, "memory", "used_memory");
const redisCommands = (redis: TestRedisServer) => redisInfo(redis, "stats", "total_commands_processed");

/** The kernel's count of connections dropped at a full accept queue (TcpExt ListenOverflows). */
function listenOverflows(): number {
  const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
  const names = lines.find((line) => line.startsWith("TcpExt:"))!.split(" ");
  const values = lines.filter((line) => line.startsWith("TcpExt:"))[1]!.split(" ");
  return Number(values[names.indexOf("ListenOverflows")]);
}

// --- the bench ----------------------------------------------------------------------

export async function scaleBench(): Promise<void> {
  const t0 = performance.now();
  const note = (what: string) =>
    process.stderr.write(`[scale bench ${((performance.now() - t0) / 1000).toFixed(0)} s] ${what}\n`);
  if (NODES % SHARDS !== 0)
    throw new Error(`BENCH_SCALE_NODES (${NODES}) must be a multiple of the shards (${SHARDS})`);
  // Sockets: one per waiting standby and the pools', here and in the bridge (which inherits the limit).
  const sockets = SHARDS + RENEW_SOCKETS + POLL_SOCKETS + OTHER_SOCKETS;
  const limit = openFilesLimit();
  note(`open files: limit ${limit}, sockets at most ${sockets} (+ the bridge's Redis connections and files)`);
  if (sockets + 200 > limit)
    throw new Error(
      `ulimit -n ${limit} is too low for ${sockets} sockets: raise it or lower BENCH_SCALE_SHARDS`,
    );
  const bridgeRuns = SHARDBRIDGE.args.some((a) => a.endsWith("dist/cli.js"))
    ? "the compiled bridge (dist/cli.js)"
    : "the bridge from src/ through tsx (dist/ is older than the sources or the commit: npm run build)";
  note(`${bridgeRuns}`);

  const agents = Array.from({ length: SHARDS }, (_, s) => [agentName(s, 0), agentName(s, 1)]).flat();
  const redis = await TestRedisServer.start();
  let bridge: BridgeProcess | undefined;
  let fleet: Fleet | undefined;
  let floor: EchoServer | undefined;
  const floorDir = mkdtempSync(join(tmpdir(), "shardbridge-scale-floor-"));
  process.once("exit", () => rmSync(floorDir, { recursive: true, force: true }));
  const loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  try {
    const memoryEmpty = await usedMemory(redis);
    bridge = await startBridge({
      shards: [],
      agents,
      store: redis.url,
      // The young generation examples/systemd/shardbridge.service gives it.
      env: {
        SHARDBRIDGE_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn",
        NODE_OPTIONS: BRIDGE_NODE_OPTIONS,
      },
      // e.g. "--cpu-prof --cpu-prof-dir=DIR": written when the bridge exits (see the end)
      nodeFlags: process.env.BENCH_BRIDGE_NODE_FLAGS?.split(" ").filter((flag) => flag !== ""),
    });
    // An exception thrown in an answer's callback ends the process without the finally below:
    // the children die with it (their helpers' exit hooks), and so does the bridge's directory.
    const bridgeDir = bridge.dir;
    process.once("exit", () => rmSync(bridgeDir, { recursive: true, force: true }));
    const url = new URL(bridge.url);
    base = { host: url.hostname, port: Number(url.port) };
    const bearers = new Map(
      bridge.tokens.tokens.flatMap((t) => (t.role === "agent" ? [[t.agent, t.token] as const] : [])),
    );
    const admin = bridge.tokenFor("admin");
    const pid = bridge.serve.child.pid!;
    const rssIdleKb = rssKb(pid);

    note(`bulk load: ${NODES.toLocaleString("en-US")} nodes in ${SHARDS.toLocaleString("en-US")} shards`);
    const perShard = NODES / SHARDS;
    const loadStarted = performance.now();
    for (let from = 0; from < NODES; from += BULK) {
      const nodes = Array.from({ length: Math.min(BULK, NODES - from) }, (_, k) => {
        const i = from + k;
        return {
          uuid: nodeUuid(i + 1),
          name: `node-${i}`,
          shard: shardName(Math.floor(i / perShard)),
          conductor_group: "",
          instance_host: null,
        };
      });
      const out = await pools.other.request(
        "POST",
        "/v1/nodes/bulk",
        admin,
        JSON.stringify({ nodes }),
        300_000,
      );
      if (out.status !== 200) throw new Error(`bulk at ${from}: ${out.status} ${out.body.slice(0, 500)}`);
    }
    const loadS = (performance.now() - loadStarted) / 1000;
    const memoryLoaded = await usedMemory(redis);
    const rssLoadedKb = rssKb(pid);

    note("first leases (one TTL after the store's start at the earliest)");
    const firstStarted = performance.now();
    fleet = await startFleet((agent) => bearers.get(agent)!);
    const firstS = (performance.now() - firstStarted) / 1000;

    // One node list as the bridge answers it: the floor answers every list with these bytes.
    const listFile = join(floorDir, "node-list.json");
    const sample = await pools.other.request(
      "GET",
      `/v1/agents/${agentName(0, 0)}/nodes?token=${fleet.token[0]![0]}`,
      bearers.get(agentName(0, 0))!,
    );
    if (sample.status !== 200)
      throw new Error(`node list for the floor: ${sample.status} ${sample.body.slice(0, 300)}`);
    writeFileSync(listFile, sample.body);

    const phases: Phase[] = [];
    // Waiting first: a fleet that polls saturates a bridge, and the backlog it leaves
    // (requests queued in this process, leases lost) would be the next phase's start.
    for (const mode of ["waiting", "polling"] as const) {
      const phase = new Phase(mode);
      fleet.phase = phase;
      // The waits in flight end now: each standby asks again, as this phase's standbys do.
      pools.wait.closeAll();
      note(`${mode} standbys: ${WARMUP_S} s warm-up, then ${SECONDS} s measured`);
      phases.push(await measure(phase, fleet, { serverPid: pid, redis }, loop, note));
    }
    fleet.stop();
    await stopBridge(bridge);
    bridge = undefined;

    // The floor, last: the same fleet, its standbys waiting, against node:http that does one
    // script call a lease write or heartbeat and answers every list with the bridge's bytes.
    for (const pool of Object.values(pools)) pool.closeAll();
    floor = await startEchoServer({ redisUrl: redis.url, fleetList: listFile });
    base = { host: "127.0.0.1", port: Number(new URL(floor.url).port) };
    fleet = await startFleet((agent) => bearers.get(agent)!);
    const floorPhase = new Phase("waiting", "floor");
    fleet.phase = floorPhase;
    note(`the floor, standbys waiting: ${WARMUP_S} s warm-up, then ${SECONDS} s measured`);
    phases.push(await measure(floorPhase, fleet, { serverPid: floor.pid, redis }, loop, note));
    fleet.stop();
    report(phases, {
      loadS,
      firstS,
      memoryEmpty,
      memoryLoaded,
      rssIdleKb,
      rssLoadedKb,
      totalS: (performance.now() - t0) / 1000,
      bridgeRuns,
    });
  } finally {
    fleet?.stop();
    for (const pool of Object.values(pools)) pool.destroy();
    if (bridge !== undefined) await stopBridge(bridge);
    await floor?.stop();
    rmSync(floorDir, { recursive: true, force: true });
    await redis.stop();
  }
}

/** A fleet against the server the pools reach now: every shard's first lease taken, then everyone's traffic started. */
async function startFleet(bearer: (agent: string) => string): Promise<Fleet> {
  const fleet = new Fleet(bearer, SHARDS);
  await fleet.takeFirstLeases();
  fleet.start();
  fleet.listNodes(LISTS_PER_S);
  return fleet;
}

/** Stop the bridge; one under BENCH_BRIDGE_NODE_FLAGS exits by itself first, so that --cpu-prof writes its profile. */
async function stopBridge(bridge: BridgeProcess): Promise<void> {
  if (process.env.BENCH_BRIDGE_NODE_FLAGS !== undefined) {
    bridge.serve.child.kill("SIGTERM");
    await bridge.serve.exited();
  }
  await bridge.stop();
}

/**
 * One phase: `fleet` against its server (process `serverPid`) for the warm-up, then measured for
 * SECONDS; against the bridge with one crash and one handover in the window.
 */
async function measure(
  phase: Phase,
  fleet: Fleet,
  processes: { serverPid: number; redis: TestRedisServer },
  loop: IntervalHistogram,
  note: (what: string) => void,
): Promise<Phase> {
  const { serverPid: pid, redis } = processes;
  await sleep(WARMUP_S * 1000);
  const cpu0 = { server: processCpuS(pid), redis: processCpuS(redis.pid), load: process.cpuUsage() };
  const commands0 = await redisCommands(redis);
  const overflows0 = listenOverflows();
  loop.reset();
  loop.enable();
  phase.recording = true;
  phase.startedAt = performance.now();
  const sampler = setInterval(() => {
    phase.rssMaxKb = Math.max(phase.rssMaxKb, rssKb(pid));
    const queued = Object.values(pools).reduce((sum, pool) => sum + pool.queued, 0);
    phase.queuedMax = Math.max(phase.queuedMax, queued);
  }, 1000);
  const name = phase.target === "floor" ? "the floor" : phase.mode;
  const probes =
    phase.target === "floor"
      ? Promise.resolve()
      : (async () => {
          await sleep((SECONDS * 1000) / 4);
          note(`${name}: crash of one active`);
          phase.crash = await fleet.crashOne();
          await sleep((SECONDS * 1000) / 4);
          note(`${name}: handover by one active`);
          phase.handover = await fleet.handoverOne();
        })().catch((error: unknown) => note(`${name}: no crash or handover measured: ${String(error)}`));
  await sleep(SECONDS * 1000);
  await probes;
  phase.recording = false;
  phase.endedAt = performance.now();
  clearInterval(sampler);
  loop.disable();
  const used = process.cpuUsage(cpu0.load);
  phase.cpu = {
    server: processCpuS(pid) - cpu0.server,
    redis: processCpuS(redis.pid) - cpu0.redis,
    load: (used.user + used.system) / 1e6,
  };
  // the histogram holds each turn of its 10 ms timer: the delay is what is over 10 ms
  phase.loopP99Ms = loop.percentile(99) / 1e6 - LOOP_RESOLUTION_MS;
  phase.loopMaxMs = loop.max / 1e6 - LOOP_RESOLUTION_MS;
  phase.rssEndKb = rssKb(pid);
  phase.redisUsedMemory = await usedMemory(redis);
  phase.redisCommands = (await redisCommands(redis)) - commands0;
  phase.listenOverflows = listenOverflows() - overflows0;
  return phase;
}

/** Numbers in ascending order (a typed array sorts numerically). */
const sorted = (xs: number[]) => Float64Array.from(xs).sort() as unknown as number[];

/** The renews' p99 in each 5 s of the phase's window, ms: when the slow ones came. */
function renewP99By5s(phase: Phase): string {
  const slices: number[][] = [];
  phase.renewMs.forEach((ms, i) => {
    const slice = Math.floor((phase.renewDoneAt[i]! - phase.startedAt) / 5000);
    (slices[slice] ??= []).push(ms);
  });
  return Array.from(slices, (slice) =>
    slice === undefined ? "-" : percentile(sorted(slice), 99).toFixed(0),
  ).join(" ");
}

function report(
  phases: Phase[],
  setup: {
    loadS: number;
    firstS: number;
    memoryEmpty: number;
    memoryLoaded: number;
    rssIdleKb: number;
    rssLoadedKb: number;
    totalS: number;
    bridgeRuns: string;
  },
): void {
  const polling = phases.find((phase) => phase.mode === "polling")!;
  const waiting = phases.find((phase) => phase.mode === "waiting" && phase.target === "bridge")!;
  const floor = phases.find((phase) => phase.target === "floor")!;
  const columns = [polling, waiting, floor];
  const stats = (p: Phase) => {
    const renew = sorted(p.renewMs);
    const list = sorted(p.listMs);
    const heartbeat = sorted(p.heartbeatMs);
    const standbyPerS = p.standbyRequests / p.seconds;
    return {
      renewPerS: renew.length / p.seconds,
      renewP50: percentile(renew, 50),
      renewP99: percentile(renew, 99),
      renewMax: renew.length > 0 ? renew[renew.length - 1]! : NaN,
      standbyPerS,
      perStandbyPerMin: (standbyPerS / SHARDS) * 60,
      perChange: p.leaseChanges > 0 ? p.standbyRequests / p.leaseChanges : NaN,
      listPerS: list.length / p.seconds,
      listP50: percentile(list, 50),
      listP99: percentile(list, 99),
      heartbeatPerS: heartbeat.length / p.seconds,
      heartbeatP99: percentile(heartbeat, 99),
      redisCommandsPerS: p.redisCommands / p.seconds,
      /** the server's CPU µs per request it answered */
      cpuPerRequest:
        (p.cpu.server / (renew.length + p.standbyRequests + list.length + heartbeat.length)) * 1e6,
    };
  };
  type Stats = ReturnType<typeof stats>;
  const [a, b, f] = columns.map(stats) as [Stats, Stats, Stats];
  const ratio = (x: number, y: number) =>
    Number.isFinite(x) && Number.isFinite(y) && x !== 0 ? `${(y / x).toPrecision(2)}x` : "";
  /** a figure of each phase, with the waiting bridge's ratios to polling and to the floor */
  const row = (what: string, figure: (s: Stats) => number, withRatio = true) => [
    what,
    figure(a),
    figure(b),
    figure(f),
    withRatio ? ratio(figure(a), figure(b)) : "",
    withRatio ? ratio(figure(f), figure(b)) : "",
  ];
  const pct = (cpuS: number, p: Phase) => `${Math.round((cpuS / p.seconds) * 100)}%`;
  const lateness = (p: Phase) => {
    const lags = sorted(p.renewSendLagMs);
    return `${percentile(lags, 99).toFixed(1)} / ${(lags[lags.length - 1] ?? NaN).toFixed(1)}`;
  };
  /** a row that is no ratio: the same figure of each phase (the floor has no crash or handover) */
  const each = (what: string, figure: (p: Phase) => number | string) => [
    what,
    ...columns.map(figure),
    "",
    "",
  ];
  printTable(
    `A million nodes on one bridge (#32): ${NODES.toLocaleString("en-US")} nodes, ${SHARDS.toLocaleString("en-US")} shards ` +
      `of ${NODES / SHARDS}, ${(2 * SHARDS).toLocaleString("en-US")} agents (an active and a standby per shard), ` +
      `one redis-server, TTL ${TTL_MS} ms; ${SECONDS} s measured per phase after ${WARMUP_S} s of warm-up.\n` +
      `  Renews every TTL/3 by each active, a heartbeat every ${HEARTBEAT_MS / 1000} s by every agent, ` +
      `${LISTS_PER_S.toFixed(0)} node lists/s by the actives; standbys waiting (wait_ms ${WAIT_MS}), then polling ` +
      `every ${POLL_MIN_MS}-${POLL_MAX_MS} ms. The floor, last, in the same run: the same fleet, standbys waiting, ` +
      `against node:http doing one script call a lease write or heartbeat and answering each list with the ` +
      `bridge's bytes (test/bench/echo-server.ts). All times from the load process's clock.`,
    ["what", "polling standbys", "waiting standbys", "the floor", "waiting / polling", "waiting / floor"],
    [
      row("renews/s", (s) => s.renewPerS),
      row("renew p50, ms", (s) => s.renewP50),
      row("renew p99, ms (goal < 5)", (s) => s.renewP99),
      each("  by 5 s of the window", renewP99By5s),
      row("renew max, ms", (s) => s.renewMax),
      each("leases lost: renew refused / answered past 2/3 TTL", (p) => `${p.lostRefused} / ${p.lostLate}`),
      row("standby requests/s", (s) => s.standbyPerS),
      row("  per standby per minute", (s) => s.perStandbyPerMin),
      each("changes of holder in the window", (p) => p.leaseChanges),
      row("  standby requests per change of holder", (s) => s.perChange),
      row("node lists/s", (s) => s.listPerS, false),
      row("node list p50, ms", (s) => s.listP50),
      row("node list p99, ms", (s) => s.listP99),
      each("node lists short of the shard's nodes", (p) => p.listsShort),
      row("heartbeats/s", (s) => s.heartbeatPerS, false),
      row("heartbeat p99, ms", (s) => s.heartbeatP99),
      each("crash failover: grant after TTL from the last renew sent, ms", (p) => p.crash?.failoverMs ?? NaN),
      each("  its standby's requests from the crash to the grant", (p) => p.crash?.standbyRequests ?? NaN),
      each("handover: grant after the release's answer, ms", (p) => p.handover?.ms ?? NaN),
      each(
        "  its standby's requests from the release to the grant",
        (p) => p.handover?.standbyRequests ?? NaN,
      ),
      each("server CPU (the bridge; the floor), % of one core", (p) => pct(p.cpu.server, p)),
      row("  CPU µs per request it answered", (s) => s.cpuPerRequest),
      each("redis-server CPU, % of one core", (p) => pct(p.cpu.redis, p)),
      row("  commands/s (INFO stats: a script and each call in it)", (s) => s.redisCommandsPerS),
      each("load process CPU, % of one core", (p) => pct(p.cpu.load, p)),
      each(
        "load process event-loop delay p99 / max, ms",
        (p) => `${p.loopP99Ms.toFixed(1)} / ${p.loopMaxMs.toFixed(1)}`,
      ),
      each("  its renews sent late, p99 / max, ms", lateness),
      each("  requests waiting for a pool's socket, most", (p) => p.queuedMax),
      each("  connections dropped at the server's full accept queue", (p) => p.listenOverflows),
      each(
        "server RSS, MiB: most / at the end",
        (p) => `${(p.rssMaxKb / 1024).toFixed(0)} / ${(p.rssEndKb / 1024).toFixed(0)}`,
      ),
      each("Redis used_memory at the end, MiB", (p) => p.redisUsedMemory / 2 ** 20),
      each("errors", (p) => [...p.errors].map(([what, n]) => `${n} ${what}`).join("; ") || "none"),
    ],
  );
  printTable(
    "Setting up the fleet",
    ["what", "value"],
    [
      ["the bridge", setup.bridgeRuns],
      ["  its NODE_OPTIONS (as its systemd unit sets them)", BRIDGE_NODE_OPTIONS || "none"],
      [
        `bulk load, ${NODES.toLocaleString("en-US")} nodes in requests of ${BULK.toLocaleString("en-US")}, s`,
        setup.loadS,
      ],
      [
        "Redis used_memory empty / loaded, MiB",
        `${(setup.memoryEmpty / 2 ** 20).toFixed(1)} / ${(setup.memoryLoaded / 2 ** 20).toFixed(1)}`,
      ],
      ["  bytes per node", (setup.memoryLoaded - setup.memoryEmpty) / NODES],
      [
        "bridge RSS idle / after the load, MiB",
        `${(setup.rssIdleKb / 1024).toFixed(0)} / ${(setup.rssLoadedKb / 1024).toFixed(0)}`,
      ],
      [
        `first leases (${SHARDS.toLocaleString("en-US")}, 64 at a time, after the store's first TTL), s`,
        setup.firstS,
      ],
      ["bench wall time, s", setup.totalS],
    ],
  );
}
