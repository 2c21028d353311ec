import { setTimeout as sleep } from "node:timers/promises";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./redis-server.js";

/**
 * Real Redis Sentinel and Redis Cluster topologies for fault tests: every process is a
 * redis-server of our own on a free loopback port, without persistence, in a temp
 * directory, killed when the test process exits. Never the machine's Redis.
 *
 * Sentinels run as `redis-server <conf> --sentinel`, so only the redis-server binary is
 * needed (plus redis-cli from redis-tools for `--cluster create`).
 */

const HOST = "127.0.0.1";
/** How long a process may take to answer PING after spawn. */
const LAUNCH_TIMEOUT_MS = 10_000;
/** How long one probe command may take: a frozen process must fail it, not hang us. */
const PROBE_TIMEOUT_MS = 1_000;
const POLL_INTERVAL_MS = 50;
/** redis-server's own log lines quoted in an error, to say why something did not happen. */
const LOG_LINES_IN_ERRORS = 6;

export interface HostPort {
  host: string;
  port: number;
}
export type ServerRole = "master" | "replica";
export type ProcessState = "running" | "frozen" | "dead";
export interface ProcessInfo {
  kind: "redis" | "sentinel";
  port: number;
  /** undefined once killed */
  pid: number | undefined;
  state: ProcessState;
}

// ---------------------------------------------------------------------------------------
// Cleanup on exit: like src/tools/chaos/redis-server.ts, whatever a run left behind goes with
// the process, even when a test failed before its stop().

const runningChildren = new Set<ChildProcess>();
const setupDirs = new Set<string>();
process.once("exit", () => {
  // SIGKILL also ends a process that a test left frozen with SIGSTOP.
  for (const child of runningChildren) child.kill("SIGKILL");
  for (const dir of setupDirs) rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------
// Waiting and probing

/** Thrown inside waitUntil to stop waiting for something that can no longer happen. */
class HopelessWait extends Error {}

/** One look at a condition: met (with a value), not yet (saying what was seen), or hopeless. */
type Poll<T> = { done: T } | { waiting: string } | { failed: string };

/**
 * Poll until `look` reports done, and fail with `what` plus the last thing seen when
 * `timeoutMs` passes. An exception inside `look` counts as "not yet" (a server may still
 * be starting); `{ failed }` stops at once (a process exited).
 */
async function waitUntil<T>(what: string, timeoutMs: number, look: () => Promise<Poll<T>>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastSeen = "nothing yet";
  for (;;) {
    try {
      const result = await look();
      if ("done" in result) return result.done;
      if ("failed" in result) throw new HopelessWait(`${what}: ${result.failed}`);
      lastSeen = result.waiting;
    } catch (error) {
      if (error instanceof HopelessWait) throw error;
      lastSeen = error instanceof Error ? error.message : String(error);
    }
    if (Date.now() >= deadline) throw new Error(`${what} within ${timeoutMs} ms; last seen: ${lastSeen}`);
    await sleep(POLL_INTERVAL_MS);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * One command on a short-lived connection of its own. A dead process fails it at once and
 * a frozen one (whose kernel still accepts the connection) within `timeoutMs`, so no
 * probe ever hangs a wait loop; no state is kept between probes.
 */
async function ask(port: number, command: string, ...args: string[]): Promise<unknown> {
  const connection = new Redis(port, HOST, {
    lazyConnect: true,
    connectTimeout: PROBE_TIMEOUT_MS,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  connection.on("error", () => undefined);
  try {
    const answer = async () => {
      await connection.connect();
      return connection.call(command, ...args);
    };
    return await withTimeout(answer(), PROBE_TIMEOUT_MS, `${command} ${args.join(" ")} on ${port}`);
  } finally {
    connection.disconnect();
  }
}

/** A master's INFO replication lines of its replicas (slave0, slave1, ...: ip=...,state=...,offset=...). */
function replicaLines(replication: Record<string, string>): string[] {
  return Object.entries(replication)
    .filter(([field]) => /^slave\d+$/.test(field))
    .map(([, line]) => line);
}

/** `field:value` lines (INFO, CLUSTER INFO) as a map. */
function fieldLines(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && !line.startsWith("#")) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

async function info(port: number, section: string): Promise<Record<string, string>> {
  return fieldLines(String(await ask(port, "INFO", section)));
}

/** "master" or "replica", from the server itself (ROLE), not from what a sentinel believes. */
async function roleOf(port: number): Promise<ServerRole> {
  const reply = (await ask(port, "ROLE")) as unknown[];
  return reply[0] === "master" ? "master" : "replica";
}

/** A flat [field, value, field, value, ...] reply (SENTINEL MASTER) as a map. */
function fieldsOf(reply: unknown): Record<string, string> {
  const list = reply as string[];
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) fields[list[i]!] = String(list[i + 1]);
  return fields;
}

/** `n` distinct free loopback ports (freePort alone may hand out the same one twice). */
async function distinctFreePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

function plainClient(port: number): Redis {
  const client = new Redis(port, HOST, { maxRetriesPerRequest: 1 });
  client.on("error", () => undefined);
  return client;
}

// ---------------------------------------------------------------------------------------
// One process

/**
 * One redis-server (data node or sentinel) on a fixed port with its own directory. It can
 * be killed, frozen, thawed and launched again on the same port; `launch` resolves once it
 * answers PING.
 */
class RedisProcess {
  private child: ChildProcess | null = null;
  private frozen = false;

  constructor(
    readonly kind: "redis" | "sentinel",
    readonly port: number,
    /** its own directory: data files, nodes.conf or sentinel.conf, and its log */
    readonly dir: string,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  get logFile(): string {
    return join(this.dir, this.kind === "sentinel" ? "sentinel.log" : "redis.log");
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get state(): ProcessState {
    if (this.child === null) return "dead";
    return this.frozen ? "frozen" : "running";
  }

  info(): ProcessInfo {
    return { kind: this.kind, port: this.port, pid: this.pid, state: this.state };
  }

  async launch(args: string[]): Promise<void> {
    if (this.child !== null) throw new Error(`${this.kind} on ${this.port} is already running`);
    const child = spawn("redis-server", args, { stdio: "ignore" });
    runningChildren.add(child);
    let spawnError: Error | null = null;
    const forget = () => {
      runningChildren.delete(child);
      if (this.child === child) {
        this.child = null;
        this.frozen = false;
      }
    };
    child.once("exit", forget);
    child.once("error", (error) => {
      spawnError = error;
      forget();
    });
    this.child = child;
    this.frozen = false;
    await waitUntil(`${this.kind} on ${this.port} did not answer PING`, LAUNCH_TIMEOUT_MS, async () => {
      if (spawnError !== null)
        return {
          failed: `cannot run redis-server (${spawnError.message}): install it, e.g. apt-get install redis-server`,
        };
      if (child.exitCode !== null || child.signalCode !== null)
        return { failed: `exited (${child.exitCode ?? child.signalCode}); log: ${this.logTail()}` };
      await ask(this.port, "PING");
      return { done: undefined };
    });
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child === null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    // After "exit" the process is reaped: its pid is gone, not a zombie.
    await exited;
  }

  freeze(): void {
    this.signal("SIGSTOP");
    this.frozen = true;
  }

  thaw(): void {
    this.signal("SIGCONT");
    this.frozen = false;
  }

  private signal(signal: NodeJS.Signals): void {
    if (this.child === null) throw new Error(`${this.kind} on ${this.port} is not running`);
    this.child.kill(signal);
  }

  /** The last lines of its log, for error messages. */
  logTail(lines = LOG_LINES_IN_ERRORS): string {
    try {
      return readFileSync(this.logFile, "utf8").trimEnd().split("\n").slice(-lines).join(" | ");
    } catch {
      return "(no log)";
    }
  }

  /** Its log lines, each with the wall-clock ms redis-server stamped on it. */
  logLines(): LogLine[] {
    let text: string;
    try {
      text = readFileSync(this.logFile, "utf8");
    } catch {
      return [];
    }
    const lines: LogLine[] = [];
    for (const line of text.split("\n")) {
      // "<pid>:<role> 02 Dec 2026 00:26:40.123 * <message>"
      const match = /^\d+:\w (\d\d \w{3} \d{4} [\d:.]+) [-.*#] (.*)$/.exec(line);
      if (match === null) continue;
      // redis-server stamps local time, which Date.parse reads the same way (same TZ).
      lines.push({ at: Date.parse(match[1]!), source: `${this.kind} ${this.port}`, text: match[2]! });
    }
    return lines;
  }
}

/** One line of a redis-server or sentinel log. */
export interface LogLine {
  /** wall-clock ms */
  at: number;
  /** "redis <port>" or "sentinel <port>" */
  source: string;
  text: string;
}

/**
 * The arguments every data node gets: loopback only, no persistence, own directory.
 * Full syncs go over the socket at once (diskless, no 5 s wait for more replicas), and a
 * replica that loads one from disk deletes it afterwards, so a restart really is empty.
 */
function dataNodeArgs(port: number, dir: string, extra: string[]): string[] {
  // prettier-ignore
  return [
    "--port", String(port),
    "--bind", HOST,
    "--protected-mode", "yes",
    "--save", "",
    "--appendonly", "no",
    "--dir", dir,
    "--logfile", join(dir, "redis.log"), // RedisProcess.logFile
    "--repl-diskless-sync", "yes",
    "--repl-diskless-sync-delay", "0",
    "--repl-diskless-load", "on-empty-db",
    "--rdb-del-sync-files", "yes",
    ...extra,
  ];
}

/** Forget any RDB file in `dir`: without persistence a restarted node must come back empty. */
function removeDataFiles(dir: string): void {
  rmSync(join(dir, "dump.rdb"), { force: true });
}

/** The log lines of `processes` from `sinceMs` (wall clock) on, in time order. */
function logsSince(processes: RedisProcess[], sinceMs: number): LogLine[] {
  return processes
    .flatMap((p) => p.logLines())
    .filter((line) => line.at >= sinceMs)
    .sort((a, b) => a.at - b.at);
}

/** The processes of one setup, by port. */
class ProcessGroup {
  private readonly byPort = new Map<number, RedisProcess>();

  add(member: RedisProcess): void {
    this.byPort.set(member.port, member);
  }

  has(port: number): boolean {
    return this.byPort.has(port);
  }

  get(port: number): RedisProcess {
    const member = this.byPort.get(port);
    if (member === undefined) throw new Error(`port ${port} is not part of this setup`);
    return member;
  }

  all(): RedisProcess[] {
    return [...this.byPort.values()];
  }

  async killAll(): Promise<void> {
    await Promise.all(this.all().map((p) => p.kill()));
  }
}

function newSetupDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  setupDirs.add(dir);
  return dir;
}

function removeSetupDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  setupDirs.delete(dir);
}

// ---------------------------------------------------------------------------------------
// Sentinel

export interface SentinelOptions {
  replicas?: number;
  sentinels?: number;
  /** how long a sentinel waits for PING replies before it calls a server down; at least MIN_DOWN_AFTER_MS */
  downAfterMs?: number;
  /** see SentinelSetup.start */
  failoverTimeoutMs?: number;
  masterName?: string;
  /** sentinels that must agree the master is down; default a majority */
  quorum?: number;
}

export interface ServerInfo {
  port: number;
  pid: number | undefined;
  /** as the sentinels last told the harness (updated by currentMaster/waitForNewMaster) */
  role: ServerRole;
  state: ProcessState;
}

export interface Promotion {
  port: number;
  /** until the new master answered ROLE as master and one sentinel named it */
  elapsedMs: number;
  /** until every live sentinel named it, i.e. any client asking any sentinel finds it */
  agreedMs: number;
}

/** A sentinel's `+switch-master`, as heard: when (wall ms), from which sentinel, old and new master. */
export interface MasterSwitch {
  at: number;
  sentinel: number;
  oldPort: number;
  newPort: number;
}

/** One read of a hash on the master the sentinels named then (see watchHash). */
export interface HashSighting {
  /** wall ms */
  at: number;
  port: number;
  fields: Record<string, string>;
}

/**
 * The shortest down-after the harness accepts. After a failover each sentinel drops its
 * link to the old master and connects to the new one, but reconnects a link at most once
 * a second (Sentinel's ping period), counting the new master's silence from the switch: 3
 * of 30 switches measured here had no PONG for 1,011-1,019 ms. With down-after 1000 such
 * a sentinel calls the master it has just promoted down, and the other sentinels' "down"
 * votes from the failover just finished (kept for 5 s) make that objective at once: a
 * second failover promotes the other replica while the first promoted one stays a master
 * that nobody demotes until the sentinels' next INFO of it, ~10 s later. Lease writes
 * then find no replica to acknowledge them for those 10 s (1 round in 8 of kill -9 did
 * this here, and the fault test saw no holder for 17 s). 2 s leaves a second of margin
 * (0 double failovers in 10).
 */
const MIN_DOWN_AFTER_MS = 2000;

interface SentinelSettings {
  replicas: number;
  sentinels: number;
  downAfterMs: number;
  failoverTimeoutMs: number;
  masterName: string;
  quorum: number;
}

/**
 * One master, N replicas and M sentinels monitoring them, all on loopback.
 *
 * Failover timing on loopback: a sentinel pings every min(down-after, 1 s) and calls the
 * master subjectively down after down-after without a reply, then asks the others (quorum)
 * and elects a leader, which promotes a replica. failover-timeout bounds one failover
 * attempt, and a sentinel that started or voted for a failover will not start another of
 * the same master for 2 × failover-timeout: keep it short, or use one setup per fault.
 * Observed with down-after 2000 and failover-timeout 3000 (Redis 7.0.15):
 * - kill -9 of the master: new master after ~3.3 s.
 * - SENTINEL FAILOVER: new master after ~1.1 s, but the old master, alive, still says
 *   master and takes writes for ~10 s more, until the sentinels next read its INFO
 *   (every 10 s for a replica) and demote it; clients still connected write there.
 * - replicas that are frozen (or otherwise down) when the failover starts: the attempt
 *   is aborted (no good replica) and retried 2 × failover-timeout later (~8 s in all).
 *
 * Why down-after is at least MIN_DOWN_AFTER_MS: see there.
 */
export class SentinelSetup {
  readonly sentinels: HostPort[];
  readonly masterName: string;
  private readonly dataNodes: ProcessGroup;
  private readonly sentinelNodes: ProcessGroup;
  private readonly roles = new Map<number, ServerRole>();
  private readonly openClients = new Set<Redis>();
  private stopped = false;

  private constructor(
    private readonly settings: SentinelSettings,
    /** the temp directory holding every process's own directory; removed by stop() */
    readonly dir: string,
    private readonly initialMasterPort: number,
    private readonly initialReplicaPorts: number[],
    sentinelPorts: number[],
  ) {
    this.masterName = settings.masterName;
    this.sentinels = sentinelPorts.map((port) => ({ host: HOST, port }));
    this.dataNodes = new ProcessGroup();
    this.sentinelNodes = new ProcessGroup();
    for (const port of [initialMasterPort, ...initialReplicaPorts])
      this.dataNodes.add(new RedisProcess("redis", port, join(dir, `redis-${port}`)));
    for (const port of sentinelPorts)
      this.sentinelNodes.add(new RedisProcess("sentinel", port, join(dir, `sentinel-${port}`)));
  }

  static async start(options: SentinelOptions = {}): Promise<SentinelSetup> {
    const sentinelCount = options.sentinels ?? 3;
    const settings: SentinelSettings = {
      replicas: options.replicas ?? 2,
      sentinels: sentinelCount,
      downAfterMs: options.downAfterMs ?? MIN_DOWN_AFTER_MS,
      failoverTimeoutMs: options.failoverTimeoutMs ?? 3000,
      masterName: options.masterName ?? "sbmaster",
      quorum: options.quorum ?? Math.floor(sentinelCount / 2) + 1,
    };
    if (settings.downAfterMs < MIN_DOWN_AFTER_MS)
      throw new Error(
        `downAfterMs ${settings.downAfterMs}: at least ${MIN_DOWN_AFTER_MS}, or a sentinel may fail over ` +
          "the master it has just promoted (see MIN_DOWN_AFTER_MS)",
      );
    const [masterPort, ...rest] = await distinctFreePorts(1 + settings.replicas + settings.sentinels);
    const replicaPorts = rest.slice(0, settings.replicas);
    const sentinelPorts = rest.slice(settings.replicas);
    const setup = new SentinelSetup(
      settings,
      newSetupDir("sb-sentinel-"),
      masterPort!,
      replicaPorts,
      sentinelPorts,
    );
    try {
      await setup.launchServers();
      // Sentinels find the replicas in the master's INFO: start them once it lists them all.
      await setup.waitUntilReplicasInSync();
      await Promise.all(setup.sentinelNodes.all().map((s) => setup.launchSentinel(s)));
      await setup.waitUntilSentinelsSeeEverything();
    } catch (error) {
      await setup.stop();
      throw error;
    }
    return setup;
  }

  /** The store URL naming these sentinels and the master name. */
  storeSpec(): string {
    return `redis+sentinel://${this.sentinels.map((s) => `${s.host}:${s.port}`).join(",")}/${this.masterName}`;
  }

  private async launchServers(): Promise<void> {
    await this.launchDataNode(this.initialMasterPort, null);
    await Promise.all(
      this.initialReplicaPorts.map((port) => this.launchDataNode(port, this.initialMasterPort)),
    );
  }

  private async launchDataNode(port: number, replicaOf: number | null): Promise<void> {
    const node = this.dataNodes.get(port);
    removeDataFiles(node.dir);
    const replication = replicaOf === null ? [] : ["--replicaof", HOST, String(replicaOf)];
    await node.launch(dataNodeArgs(port, node.dir, replication));
    this.roles.set(port, replicaOf === null ? "master" : "replica");
  }

  private async launchSentinel(sentinel: RedisProcess): Promise<void> {
    const confFile = join(sentinel.dir, "sentinel.conf");
    // Written once: a sentinel rewrites its own file with what it learns (its id, the
    // current master, the other sentinels), and a restarted one must start from that.
    if (!existsSync(confFile)) writeFileSync(confFile, this.sentinelConf(sentinel));
    await sentinel.launch([confFile, "--sentinel"]);
  }

  private sentinelConf(sentinel: RedisProcess): string {
    const { masterName: name, quorum, downAfterMs, failoverTimeoutMs } = this.settings;
    return [
      `port ${sentinel.port}`,
      `bind ${HOST}`,
      "protected-mode yes",
      "daemonize no",
      `dir ${sentinel.dir}`,
      `logfile ${sentinel.logFile}`,
      // Addresses stay IPs: no DNS in the failover path.
      "sentinel resolve-hostnames no",
      "sentinel announce-hostnames no",
      // What this sentinel tells the others in its hello messages and what clients get
      // from SENTINEL SENTINELS: loopback and its own port, whatever the local address.
      `sentinel announce-ip ${HOST}`,
      `sentinel announce-port ${sentinel.port}`,
      `sentinel monitor ${name} ${HOST} ${this.initialMasterPort} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
      `sentinel parallel-syncs ${name} 1`,
      "",
    ].join("\n");
  }

  private async waitUntilReplicasInSync(): Promise<void> {
    await waitUntil(
      `the replicas did not sync with the master on ${this.initialMasterPort}`,
      15_000,
      async () => {
        const replication = await info(this.initialMasterPort, "replication");
        const online = replicaLines(replication).filter((line) => line.includes("state=online"));
        if (online.length < this.settings.replicas)
          return { waiting: `${online.length}/${this.settings.replicas} replicas online` };
        return { done: undefined };
      },
    );
  }

  private async waitUntilSentinelsSeeEverything(): Promise<void> {
    const { replicas, sentinels, masterName } = this.settings;
    await Promise.all(
      this.sentinels.map(({ port }) =>
        waitUntil(
          `sentinel on ${port} did not see the master, ${replicas} replicas and ${sentinels - 1} other sentinels`,
          15_000,
          async () => {
            const master = fieldsOf(await ask(port, "SENTINEL", "MASTER", masterName));
            const seen = `flags=${master.flags} replicas=${master["num-slaves"]} other sentinels=${master["num-other-sentinels"]}`;
            const replicasUp = ((await ask(port, "SENTINEL", "REPLICAS", masterName)) as unknown[])
              .map(fieldsOf)
              .filter((replica) => replica.flags === "slave").length;
            const ready =
              master.flags === "master" &&
              replicasUp === replicas &&
              Number(master["num-other-sentinels"]) === sentinels - 1;
            return ready ? { done: undefined } : { waiting: `${seen}, replicas up=${replicasUp}` };
          },
        ),
      ),
    );
  }

  private liveSentinelPorts(): number[] {
    return this.sentinelNodes
      .all()
      .filter((s) => s.state === "running")
      .map((s) => s.port);
  }

  private async masterAccordingTo(sentinelPort: number): Promise<number> {
    const reply = (await ask(sentinelPort, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", this.masterName)) as
      string[] | null;
    if (reply === null) throw new Error(`sentinel on ${sentinelPort} does not know ${this.masterName}`);
    return Number(reply[1]);
  }

  /** The master as the first live sentinel that answers names it. */
  async currentMaster(): Promise<{ port: number }> {
    const problems: string[] = [];
    for (const sentinelPort of this.liveSentinelPorts()) {
      try {
        const port = await this.masterAccordingTo(sentinelPort);
        this.noteMaster(port);
        return { port };
      } catch (error) {
        problems.push(`${sentinelPort}: ${(error as Error).message}`);
      }
    }
    throw new Error(
      `no sentinel named the master of ${this.masterName} (${problems.join("; ") || "none running"})`,
    );
  }

  private noteMaster(masterPort: number): void {
    for (const port of this.roles.keys()) this.roles.set(port, port === masterPort ? "master" : "replica");
  }

  /** The data nodes (not the sentinels). */
  servers(): ServerInfo[] {
    return this.dataNodes.all().map((node) => ({
      port: node.port,
      pid: node.pid,
      role: this.roles.get(node.port) ?? "replica",
      state: node.state,
    }));
  }

  /** Every process of the setup, data nodes and sentinels. */
  processes(): ProcessInfo[] {
    return [...this.dataNodes.all(), ...this.sentinelNodes.all()].map((p) => p.info());
  }

  private process(port: number): RedisProcess {
    return this.dataNodes.has(port) ? this.dataNodes.get(port) : this.sentinelNodes.get(port);
  }

  /** SIGKILL a data node or a sentinel; resolves once it is gone. */
  kill(port: number): Promise<void> {
    return this.process(port).kill();
  }

  /** SIGSTOP: the process keeps its sockets but answers nothing until thaw(). */
  freeze(port: number): void {
    this.process(port).freeze();
  }

  thaw(port: number): void {
    this.process(port).thaw();
  }

  /**
   * Until the master has every replica's acknowledgement of its whole stream as it is now:
   * a WAIT for writes made before this returns at once, whatever a replica does next.
   */
  async waitUntilAcked(timeoutMs = 5000): Promise<void> {
    const { port } = await this.currentMaster();
    const target = Number((await info(port, "replication")).master_repl_offset);
    await waitUntil(`replicas of ${port} did not acknowledge offset ${target}`, timeoutMs, async () => {
      const replication = await info(port, "replication");
      const acked = replicaLines(replication).map((line) => Number(/offset=(\d+)/.exec(line)?.[1] ?? -1));
      return acked.length > 0 && acked.every((offset) => offset >= target)
        ? { done: undefined }
        : { waiting: `acknowledged ${acked.join(", ")} of ${target}` };
    });
  }

  /** SCRIPT FLUSH on a data node: it forgets every script, as after an operator's flush. */
  async flushScripts(port: number): Promise<void> {
    await ask(port, "SCRIPT", "FLUSH");
  }

  /**
   * SIGKILL and start again on the same port: a data node comes back empty (no
   * persistence), as a replica of the master the sentinels name, or as an empty master if
   * they still name this very port; a sentinel comes back with the config it rewrote.
   */
  async restart(port: number): Promise<void> {
    const target = this.process(port);
    await target.kill();
    if (target.kind === "sentinel") return this.launchSentinel(target);
    const master = (await this.currentMaster()).port;
    await this.launchDataNode(port, master === port ? null : master);
  }

  /** Wait until the replica on `port` has finished syncing with its master. */
  async waitUntilInSync(port: number, timeoutMs = 15_000): Promise<void> {
    await waitUntil(`replica on ${port} did not sync`, timeoutMs, async () => {
      const replication = await info(port, "replication");
      const synced = replication.master_link_status === "up" && replication.master_sync_in_progress === "0";
      return synced ? { done: undefined } : { waiting: `link ${replication.master_link_status}` };
    });
  }

  /** Ask a sentinel for a failover now (SENTINEL FAILOVER), without agreement of the others. */
  async sentinelFailover(): Promise<{ oldPort: number }> {
    const oldPort = (await this.currentMaster()).port;
    const sentinelPort = this.liveSentinelPorts()[0];
    if (sentinelPort === undefined) throw new Error("no sentinel is running");
    await ask(sentinelPort, "SENTINEL", "FAILOVER", this.masterName);
    return { oldPort };
  }

  /**
   * Hear every live sentinel's `+switch-master` from now on: the moment a sentinel names
   * a new master, as a client subscribed to it hears it (ioredis's failover detector
   * does). `next` resolves with the first switch heard after the call to watchSwitches.
   */
  async watchSwitches(): Promise<{ next(timeoutMs: number): Promise<MasterSwitch>; stop(): void }> {
    const heard: MasterSwitch[] = [];
    const waiting = new Set<() => void>();
    const subscribers = await Promise.all(
      this.liveSentinelPorts().map(async (port) => {
        const subscriber = this.client(port);
        subscriber.on("message", (_channel: string, message: string) => {
          // "<name> <old ip> <old port> <new ip> <new port>"
          const [name, , oldPort, , newPort] = message.split(" ");
          if (name !== this.masterName) return;
          heard.push({ at: Date.now(), sentinel: port, oldPort: Number(oldPort), newPort: Number(newPort) });
          for (const wake of waiting) wake();
        });
        await subscriber.subscribe("+switch-master");
        return subscriber;
      }),
    );
    return {
      next: (timeoutMs) =>
        withTimeout(
          new Promise<MasterSwitch>((resolve) => {
            const look = () => {
              if (heard.length === 0) return;
              waiting.delete(look);
              resolve(heard[0]!);
            };
            waiting.add(look);
            look();
          }),
          timeoutMs,
          `+switch-master of ${this.masterName}`,
        ),
      stop: () => {
        for (const subscriber of subscribers) this.closeClient(subscriber);
      },
    };
  }

  /**
   * Read the hash `key` every `everyMs` on the master the sentinels name at that moment
   * (a frozen one fails the read, which is skipped), until `stop`: what the store said,
   * as any client that follows the sentinels reads it.
   */
  watchHash(key: string, everyMs: number): { stop(): Promise<HashSighting[]> } {
    const sightings: HashSighting[] = [];
    let stopped = false;
    const loop = (async () => {
      while (!stopped && !this.stopped) {
        try {
          const { port } = await this.currentMaster();
          const flat = (await ask(port, "HGETALL", key)) as string[];
          sightings.push({ at: Date.now(), port, fields: fieldsOf(flat) });
        } catch {
          // the named master frozen, or a sentinel busy: no sighting this round
        }
        await sleep(everyMs);
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        await loop;
        return sightings;
      },
    };
  }

  /**
   * Wait until a server other than `oldPort` is master: it answers ROLE as master and
   * every live sentinel names it. Measured from the call.
   */
  async waitForNewMaster(oldPort: number, timeoutMs = 20_000): Promise<Promotion> {
    const startedAt = performance.now();
    let elapsedMs: number | undefined;
    const promotion = await waitUntil<Promotion>(
      `no sentinel promoted a replica to replace ${oldPort}`,
      timeoutMs,
      async () => {
        const named = await Promise.all(
          this.liveSentinelPorts().map((port) => this.masterAccordingTo(port).catch(() => undefined)),
        );
        const candidate = named.find((port) => port !== undefined && port !== oldPort);
        if (candidate === undefined) return { waiting: `sentinels name ${named.join(",")}` };
        if ((await roleOf(candidate)) !== "master")
          return { waiting: `${candidate} named but not master yet` };
        elapsedMs ??= performance.now() - startedAt;
        if (named.some((port) => port !== candidate)) return { waiting: `sentinels name ${named.join(",")}` };
        return { done: { port: candidate, elapsedMs, agreedMs: performance.now() - startedAt } };
      },
    ).catch((error: Error): never => {
      const logs = this.sentinelNodes.all().map((s) => `sentinel ${s.port}: ${s.logTail()}`);
      throw new Error(`${error.message}\n${logs.join("\n")}`);
    });
    this.noteMaster(promotion.port);
    return promotion;
  }

  /** Every process's log lines from `sinceMs` (wall clock) on, in time order: what happened during a fault. */
  logsSince(sinceMs: number): LogLine[] {
    return logsSince([...this.dataNodes.all(), ...this.sentinelNodes.all()], sinceMs);
  }

  /** INFO replication of a data node, field by field (role, master_replid, offsets, ...). */
  replicationInfo(port: number): Promise<Record<string, string>> {
    return info(port, "replication");
  }

  /** How far into the replication stream the node's data set is (master_repl_offset). */
  async replicationOffset(port: number): Promise<number> {
    return Number((await this.replicationInfo(port)).master_repl_offset);
  }

  /**
   * Bytes of replication stream the master holds in its own memory for each connected
   * replica: written by the master, not yet accepted by the kernel (CLIENT LIST, omem).
   * Counted from the start of the 16 KB buffer block being sent, so about 20 KB even for
   * a replica that is fully caught up: only megabytes mean a stalled connection.
   */
  async pendingReplicationBytes(): Promise<number[]> {
    const master = (await this.currentMaster()).port;
    const list = String(await ask(master, "CLIENT", "LIST", "TYPE", "replica"));
    return list
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => Number(/(?:^| )omem=(\d+)/.exec(line)?.[1] ?? NaN));
  }

  /**
   * Push filler writes through the master until, for `stalledReplicas` of its replicas
   * (default: as many as are frozen now), at least `pendingBytes` of replication stream
   * wait in the master's own memory. Then a write made next is certain to reach none of
   * those replicas if the master is SIGKILLed before they are thawed.
   *
   * Why not just freeze the replicas and write: a frozen replica's connection still has
   * kernel buffers at both ends (the master's send buffer and the replica's receive
   * buffer; receive buffers on loopback autotune up to tcp_rmem max, tens of MB). A write
   * that fits there has left the master already: it survives the master's SIGKILL and is
   * applied the moment the replica gets SIGCONT. Only once those buffers are full does
   * the master keep the stream in its own memory, which dies with it. The master writes to
   * a replica socket until the kernel refuses (no per-event cap for replicas), so omem > 0
   * means the buffers are full; the margin absorbs the kernel taking a little more later.
   */
  async fillReplicationBuffers(
    options: { pendingBytes?: number; maxBytes?: number; stalledReplicas?: number } = {},
  ): Promise<{ bytesWritten: number; pendingBytes: number[] }> {
    const wanted = options.pendingBytes ?? 4 * 1024 * 1024;
    const maxBytes = options.maxBytes ?? 200 * 1024 * 1024;
    const stalledWanted =
      options.stalledReplicas ?? this.servers().filter((s) => s.state === "frozen").length;
    if (stalledWanted === 0)
      throw new Error("fillReplicationBuffers: freeze the replicas that must miss the write first");
    const filler = "f".repeat(1024 * 1024);
    const master = this.client((await this.currentMaster()).port);
    let bytesWritten = 0;
    try {
      for (;;) {
        const pending = await this.pendingReplicationBytes();
        if (pending.filter((bytes) => bytes >= wanted).length >= stalledWanted)
          return { bytesWritten, pendingBytes: pending };
        if (bytesWritten >= maxBytes)
          throw new Error(
            `fillReplicationBuffers: after ${bytesWritten} bytes only ${pending.join(",")} bytes pending per replica: is a replica not frozen?`,
          );
        // One key, overwritten: the stream grows, the master's data set does not.
        await master.set("sb:topology:filler", filler);
        bytesWritten += filler.length;
      }
    } finally {
      this.closeClient(master);
    }
  }

  /** A plain client to one data node or sentinel, for set-up; closed by stop(). */
  client(port: number): Redis {
    const client = plainClient(port);
    this.openClients.add(client);
    return client;
  }

  private closeClient(client: Redis): void {
    client.disconnect();
    this.openClients.delete(client);
  }

  /** Kill every process and remove the directories. Safe to call twice. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const client of this.openClients) client.disconnect();
    this.openClients.clear();
    await Promise.all([this.sentinelNodes.killAll(), this.dataNodes.killAll()]);
    removeSetupDir(this.dir);
  }
}

// ---------------------------------------------------------------------------------------
// Cluster

export interface ClusterOptions {
  /** at least 3: redis-cli --cluster create refuses fewer */
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long until a node that does not answer counts as failing */
  nodeTimeoutMs?: number;
}

export interface ClusterNodeView {
  id: string;
  port: number;
  role: ServerRole;
  /** the master's node id, for a replica */
  masterId: string | null;
  flags: string[];
  /** owned slot ranges, inclusive */
  slots: Array<[number, number]>;
}

const CLUSTER_SLOTS = 16384;

/** One line of CLUSTER NODES: `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...` */
function parseClusterNode(line: string): ClusterNodeView {
  const [id, address, flagList, master, , , , , ...slotFields] = line.split(" ");
  const flags = (flagList ?? "").split(",");
  const slots = slotFields
    .filter((field) => !field.startsWith("[")) // slots being migrated: [slot->-id]
    .map((field): [number, number] => {
      const [from, to] = field.split("-").map(Number);
      return [from!, to ?? from!];
    });
  return {
    id: id!,
    port: Number(/:(\d+)@/.exec(address ?? "")?.[1]),
    role: flags.includes("master") ? "master" : "replica",
    masterId: master === "-" ? null : (master ?? null),
    flags,
    slots,
  };
}

/** Which master port owns which slot ranges, as one comparable string. */
function describeOwners(owners: ClusterNodeView[]): string {
  return owners
    .map((owner) => `${owner.port}:${owner.slots.map(([from, to]) => `${from}-${to}`).join("+")}`)
    .sort()
    .join(" ");
}

function runRedisCli(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("redis-cli", args, { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error === null) return resolve(stdout);
      const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
      reject(
        new Error(
          missing
            ? "cannot run redis-cli: install it, e.g. apt-get install redis-tools"
            : `redis-cli ${args.join(" ")} failed (${error.message}): ${stdout.slice(-800)} ${stderr.slice(-400)}`,
        ),
      );
    });
  });
}

/**
 * A Redis Cluster of `masters` masters with `replicasPerMaster` replicas each, on
 * loopback. Each node gets a free port and a free cluster-bus port (--cluster-port, not
 * port + 10000, which may be taken or beyond 65535).
 */
export class ClusterSetup {
  readonly nodes: HostPort[];
  private readonly group: ProcessGroup;
  private readonly openClients = new Set<Redis>();
  private stopped = false;

  private constructor(
    /** the temp directory holding every process's own directory; removed by stop() */
    readonly dir: string,
    private readonly nodeTimeoutMs: number,
    private readonly busPorts: Map<number, number>,
  ) {
    this.group = new ProcessGroup();
    for (const port of busPorts.keys())
      this.group.add(new RedisProcess("redis", port, join(dir, `node-${port}`)));
    this.nodes = [...busPorts.keys()].map((port) => ({ host: HOST, port }));
  }

  static async start(options: ClusterOptions = {}): Promise<ClusterSetup> {
    const masters = options.masters ?? 3;
    const replicasPerMaster = options.replicasPerMaster ?? 1;
    const count = masters * (1 + replicasPerMaster);
    const ports = await distinctFreePorts(2 * count);
    const busPorts = new Map(ports.slice(0, count).map((port, i) => [port, ports[count + i]!]));
    const setup = new ClusterSetup(newSetupDir("sb-cluster-"), options.nodeTimeoutMs ?? 1000, busPorts);
    try {
      await Promise.all(setup.group.all().map((node) => setup.launchNode(node)));
      const addresses = setup.nodes.map((n) => `${n.host}:${n.port}`);
      const replicasArg = ["--cluster-replicas", String(replicasPerMaster)];
      await runRedisCli(["--cluster", "create", ...addresses, ...replicasArg, "--cluster-yes"], 30_000);
      await setup.waitUntilFormed(masters, masters * replicasPerMaster, 15_000);
      await setup.waitForClusterOk(15_000);
    } catch (error) {
      await setup.stop();
      throw error;
    }
    return setup;
  }

  private async launchNode(node: RedisProcess): Promise<void> {
    removeDataFiles(node.dir);
    // prettier-ignore
    const clusterArgs = [
      "--cluster-enabled", "yes",
      "--cluster-config-file", join(node.dir, "nodes.conf"),
      "--cluster-port", String(this.busPorts.get(node.port)),
      "--cluster-node-timeout", String(this.nodeTimeoutMs),
    ];
    await node.launch(dataNodeArgs(node.port, node.dir, clusterArgs));
  }

  /**
   * Wait until every node sees the shape redis-cli created: cluster_state:ok can come
   * before every node has heard that the replicas (CLUSTER REPLICATE) replicate.
   */
  private async waitUntilFormed(masters: number, replicas: number, timeoutMs: number): Promise<void> {
    await waitUntil(
      `the cluster did not form with ${masters} masters and ${replicas} replicas`,
      timeoutMs,
      async () => {
        for (const port of this.livePorts()) {
          const view = await this.clusterNodes(port);
          const seenMasters = view.filter((node) => node.role === "master" && node.slots.length > 0).length;
          const seenReplicas = view.filter((node) => node.role === "replica").length;
          if (seenMasters !== masters || seenReplicas !== replicas)
            return { waiting: `${port} sees ${seenMasters} masters, ${seenReplicas} replicas` };
        }
        return { done: undefined };
      },
    );
  }

  /** The store URL naming every node. */
  storeSpec(): string {
    return `redis+cluster://${this.nodes.map((n) => `${n.host}:${n.port}`).join(",")}`;
  }

  private livePorts(): number[] {
    return this.group
      .all()
      .filter((node) => node.state === "running")
      .map((node) => node.port);
  }

  /** CLUSTER NODES as one node (default: the first live one) sees it. */
  async clusterNodes(fromPort?: number): Promise<ClusterNodeView[]> {
    const port = fromPort ?? this.livePorts()[0];
    if (port === undefined) throw new Error("no cluster node is running");
    const text = String(await ask(port, "CLUSTER", "NODES"));
    return text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map(parseClusterNode);
  }

  /** Masters that own slots, with the ports of their replicas. */
  async masters(): Promise<
    Array<{ port: number; id: string; slots: Array<[number, number]>; replicaPorts: number[] }>
  > {
    const nodes = await this.clusterNodes();
    return nodes
      .filter((node) => node.role === "master" && node.slots.length > 0)
      .map((master) => ({
        port: master.port,
        id: master.id,
        slots: master.slots,
        replicaPorts: nodes.filter((node) => node.masterId === master.id).map((node) => node.port),
      }));
  }

  /** The master owning the slot of `key` (CLUSTER KEYSLOT), with its replicas. */
  async ownerOf(key: string): Promise<{ slot: number; port: number; id: string; replicaPorts: number[] }> {
    const [first] = this.livePorts();
    if (first === undefined) throw new Error("no cluster node is running");
    const slot = Number(await ask(first, "CLUSTER", "KEYSLOT", key));
    const owner = (await this.masters()).find((m) =>
      m.slots.some(([from, to]) => from <= slot && slot <= to),
    );
    if (owner === undefined) throw new Error(`no master owns slot ${slot}`);
    return { slot, port: owner.port, id: owner.id, replicaPorts: owner.replicaPorts };
  }

  /**
   * Wait until the cluster serves every slot from a running node: every live node says
   * cluster_state:ok with all slots ok and knows every node, all live nodes agree on
   * which master owns which slots, no slot belongs to a killed or frozen node (right
   * after a kill the others still say ok until cluster-node-timeout passes), and every
   * replica of a live master has its replication link up.
   */
  async waitForClusterOk(timeoutMs = 15_000): Promise<void> {
    await waitUntil("the cluster did not become ok", timeoutMs, async () => {
      const ownersByView = new Map<number, string>();
      for (const port of this.livePorts()) {
        const unhealthy = await this.unhealthyAccordingTo(port);
        if (unhealthy !== null) return { waiting: unhealthy };
        const owners = (await this.clusterNodes(port)).filter(
          (n) => n.role === "master" && n.slots.length > 0,
        );
        const absent = owners.find((owner) => !this.livePorts().includes(owner.port));
        if (absent !== undefined)
          return {
            waiting: `${port}: slots still owned by ${absent.port}, which is ${this.group.get(absent.port).state}`,
          };
        ownersByView.set(port, describeOwners(owners));
        const lagging = await this.replicaLinkDown(port);
        if (lagging !== null) return { waiting: lagging };
      }
      if (new Set(ownersByView.values()).size > 1)
        return {
          waiting: `nodes disagree on slot owners: ${[...ownersByView].map(([p, v]) => `${p}→${v}`).join("; ")}`,
        };
      return { done: undefined };
    });
  }

  /** What CLUSTER INFO on `port` says is wrong, or null. */
  private async unhealthyAccordingTo(port: number): Promise<string | null> {
    const fields = fieldLines(String(await ask(port, "CLUSTER", "INFO")));
    if (fields.cluster_state !== "ok") return `${port}: cluster_state ${fields.cluster_state}`;
    if (Number(fields.cluster_slots_ok) !== CLUSTER_SLOTS)
      return `${port}: ${fields.cluster_slots_ok} slots ok`;
    if (Number(fields.cluster_known_nodes) !== this.nodes.length)
      return `${port}: knows ${fields.cluster_known_nodes} of ${this.nodes.length} nodes`;
    return null;
  }

  /** Why the replica on `port` is not in sync with a live master, or null if it is (or is a master). */
  private async replicaLinkDown(port: number): Promise<string | null> {
    const replication = await info(port, "replication");
    if (replication.role !== "slave") return null;
    const masterPort = Number(replication.master_port);
    const masterAlive = this.livePorts().includes(masterPort);
    if (!masterAlive || replication.master_link_status === "up") return null;
    return `${port}: link to master ${masterPort} ${replication.master_link_status}`;
  }

  /**
   * CLUSTER FAILOVER on a replica (default mode: coordinated with its master, which must
   * be reachable; FORCE or TAKEOVER when it is not), then wait until that replica is the
   * master every live node agrees on, its old master (if running) replicates from it, and
   * the cluster is ok again.
   */
  async failover(
    replicaPort: number,
    mode: "" | "FORCE" | "TAKEOVER" = "",
    timeoutMs = 15_000,
  ): Promise<{ oldMasterPort: number; elapsedMs: number }> {
    const replication = await info(replicaPort, "replication");
    if (replication.role !== "slave")
      throw new Error(`${replicaPort} is not a replica (role ${replication.role})`);
    const oldMasterPort = Number(replication.master_port);
    const startedAt = performance.now();
    await ask(replicaPort, "CLUSTER", "FAILOVER", ...(mode === "" ? [] : [mode]));
    const oldMasterRuns = () => this.livePorts().includes(oldMasterPort);
    await waitUntil(`replica ${replicaPort} did not take over from ${oldMasterPort}`, timeoutMs, async () => {
      for (const port of this.livePorts()) {
        const view = await this.clusterNodes(port);
        const promoted = view.find((node) => node.port === replicaPort);
        if (promoted?.role !== "master")
          return { waiting: `${port} sees ${replicaPort} as ${promoted?.role}` };
        const demoted = view.find((node) => node.port === oldMasterPort);
        if (oldMasterRuns() && demoted?.masterId !== promoted.id)
          return { waiting: `${port} does not see ${oldMasterPort} replicate from ${replicaPort} yet` };
      }
      return { done: undefined };
    });
    await this.waitForClusterOk(Math.max(1, timeoutMs - (performance.now() - startedAt)));
    return { oldMasterPort, elapsedMs: performance.now() - startedAt };
  }

  /** Every node's log lines from `sinceMs` (wall clock) on, in time order. */
  logsSince(sinceMs: number): LogLine[] {
    return logsSince(this.group.all(), sinceMs);
  }

  /** The cluster nodes as processes. */
  processes(): ProcessInfo[] {
    return this.group.all().map((node) => node.info());
  }

  kill(port: number): Promise<void> {
    return this.group.get(port).kill();
  }

  freeze(port: number): void {
    this.group.get(port).freeze();
  }

  thaw(port: number): void {
    this.group.get(port).thaw();
  }

  /** A plain client to one node (not cluster-aware), for set-up; closed by stop(). */
  client(port: number): Redis {
    const client = plainClient(port);
    this.openClients.add(client);
    return client;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const client of this.openClients) client.disconnect();
    this.openClients.clear();
    await this.group.killAll();
    removeSetupDir(this.dir);
  }
}
