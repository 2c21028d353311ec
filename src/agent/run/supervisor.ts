import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { BridgeClient } from "../bridge-client.js";
import { bridgeKeeper } from "../../core/keeper/lease-keeper.js";
import { UNDEFINED_MAX_WAIT_MS, UndefinedShard } from "../undefined-shard.js";
import { logTransition } from "../../core/keeper/transition-log.js";
import { renewDeadlineMs } from "../../core/lease/bounds.js";
import { logger } from "../../runtime/log.js";
import { ChildCgroup } from "./cgroup.js";
import { ChildGroup, exitStatus, type ChildExit } from "./child.js";
import type { ComputeApi } from "../../upstream/nova-compute-api.js";
import { EgressFence, egressTable } from "./egress-fence.js";
import { PreemptedResend } from "./preempted-resend.js";

/**
 * Time kept back from the TTL/3 margin for the KILL to land and the group to be reaped:
 * a standby can be granted the lease at the store's expiry, at the earliest TTL after
 * the last renew the holder sent; the holder stops acting at 2/3 TTL; the child must be
 * gone in between.
 */
export const KILL_SLACK_MS = 250;

/** How often `run` tells the bridge it is up and which shard it serves (nova's report_interval). */
export const HEARTBEAT_MS = 10_000;

/**
 * The longest grace the child may have between TERM and KILL, for a lease of `ttlMs`:
 * the margin between the holder's deadline (2/3 TTL) and the earliest expiry (TTL), less
 * the slack. For the 6 s default: 1,750 ms.
 */
/**
 * The default TERM-to-KILL time when `run` itself is stopped while it holds the lease:
 * oslo.service's graceful_shutdown_timeout, the time nova-compute gives itself to finish
 * what it has begun.
 */
export const DEFAULT_STOP_GRACE_MS = 60_000;

export function maxGraceMs(ttlMs: number): number {
  return Math.max(0, ttlMs - renewDeadlineMs(ttlMs) - KILL_SLACK_MS);
}

export interface RunOptions {
  /** the physical host this supervisor runs on: its agent id at the bridge */
  id: string;
  shard: string;
  bridge: string;
  token: string;
  /** nova-compute's [DEFAULT]host: the same on every host that may run the shard's child */
  serviceHost: string;
  /** ms between TERM and KILL when the lease is lost; at most maxGraceMs(ttl) */
  graceMs: number | undefined;
  /** ms between TERM and KILL when run itself stops while holding the lease (default DEFAULT_STOP_GRACE_MS) */
  stopGraceMs?: number;
  /** run the command again when it exits while the lease is still held */
  restart: boolean;
  command: string[];
  /** the fenced Ironic endpoint for this shard under a lease (its token and fence key), when the bridge has one */
  ironicEndpoint?: (token: number, fenceKey: string) => string;
  /** while another holds the lease, ask at most this often (the keeper's default: 500 ms) */
  standbyPollMs?: number;
  /** `--resend-preempted`: the compute API through which the reboots a start cancelled are sent again */
  computeApi?: ComputeApi;
  /** `--egress-fence`: the child's cgroup cut off the network by the kernel at the lease's earliest expiry (EgressFence) */
  egressFence?: boolean;
}

/**
 * The child's environment without the Keystone credentials `run` itself was given
 * (OS_AUTH_URL, OS_PASSWORD, ...): nova-compute reads its own from nova.conf, and oslo's
 * environment options (OS_GROUP__OPTION, two underscores) stay.
 */
export function withoutOurCredentials(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(([name]) => !/^OS_/.test(name) || name.includes("__")),
  );
}

const WATCHDOG = fileURLToPath(new URL("./watchdog.sh", import.meta.url));

/**
 * `shardbridge run`: a command that runs only while this host holds the shard's lease.
 * On becoming active with token K it starts the command (ChildGroup) with the shard, the
 * token and nova's options in its environment; on losing the lease — a refused renew, or
 * the renew deadline with no renew through — it TERMs the group, KILLs it after the
 * grace, and only then may the keeper ask again. The store grants no standby the lease
 * before TTL after the last renew sent; the deadline is 2/3 TTL and the grace at most
 * what is left of the margin, so the child is gone first. If the supervisor itself is
 * frozen or starved, the watchdog (a separate process, fed the deadline on every renew)
 * kills the group; if it is killed, pdeathsig kills the child and the watchdog the rest.
 * Answers the exit status for the process.
 */
export function runSupervised(options: RunOptions): { done: Promise<number>; stop: () => void } {
  const { id, shard } = options;
  const log = logger.child({ agent: id, shard });
  const client = new BridgeClient(options.bridge, options.token);
  // `run` checked at start that the bridge knows the shard: from then on, a bridge that
  // does not is one whose store lost the definition, a state that passes.
  const undefinedShard = new UndefinedShard(true);
  const keeper = bridgeKeeper(client, shard, id, options.standbyPollMs, (cause) =>
    undefinedShard.retryAfterMs(cause),
  );
  const nowMs = () => performance.now();
  // The grace is also bounded by what is left before a standby may be granted the lease: a
  // supervisor that notices its loss late (frozen with its child, starved, its host
  // suspended) KILLs at once instead of letting a stale child drain beside its successor.
  const graceFor = () =>
    Math.max(
      0,
      Math.min(options.graceMs ?? Infinity, maxGraceMs(keeper.ttlMs), keeper.msUntilExpiry() - KILL_SLACK_MS),
    );

  const watchdog: ChildProcess = spawn("bash", [WATCHDOG], { stdio: ["pipe", "ignore", "pipe"] });
  createInterface({ input: watchdog.stderr!, crlfDelay: Infinity }).on("line", (line) =>
    log.warn("watchdog", { line }),
  );
  const feed = (line: string) => watchdog.stdin!.write(`${line}\n`);

  /** the running child, the token it was started under, and its watch of cancelled reboots */
  let child: { group: ChildGroup; token: number; resend: PreemptedResend | null } | null = null;
  /** the lease granted under `token`: its fence key (the child's Ironic endpoint names both), when (ms of the epoch) */
  let granted: { token: number; fenceKey: string | null; atMs: number } | null = null;
  /** a child being stopped: nothing new starts until it is gone */
  let stopping: Promise<unknown> = Promise.resolve();
  let finishing = false;
  let resolveDone!: (status: number) => void;
  const done = new Promise<number>((resolve) => (resolveDone = resolve));

  /** a child given a graceful stop (run itself stopping) while the lease is still held and renewed */
  let draining: ChildGroup | null = null;
  /** each child's egress fence (`--egress-fence`), until the child is gone */
  const fences = new Map<ChildGroup, EgressFence>();
  /** When the store may first grant the lease to another (ms of the epoch): where an egress fence cuts. */
  const expiryAtMs = () => Date.now() + keeper.msUntilExpiry();
  const unfence = async (group: ChildGroup, token: number) => {
    const fence = fences.get(group);
    if (fence === undefined) return;
    fences.delete(group);
    const { stopped, kept } = await fence.remove();
    if (kept)
      log.warn("egress-fence-kept", {
        token,
        table: fence.table,
        rejected_packets: stopped,
        why: "sockets of the child may be left holding what it wrote after the cut: the table stops them until the shard's next child here replaces it",
      });
    else log.info("egress-fence-removed", { token, table: fence.table, rejected_packets: stopped });
  };

  /** What the child's sockets left behind, ended with a reset its peers see (EgressFence.resetConnections). */
  const resetConnections = async (fence: EgressFence, token: number) => {
    const result = await fence.resetConnections();
    if ("cut" in result) return;
    if ("error" in result)
      log.warn("egress-fence-reset-failed", { token, table: fence.table, error: result.error });
    else
      log.info("egress-fence-reset", {
        token,
        table: fence.table,
        connections: result.reset,
        left: result.left,
      });
  };

  const arm = () => {
    const left = keeper.msLeft();
    const group = child?.group ?? draining;
    if (group === null || group === undefined || left === null) return;
    fences.get(group)?.set(expiryAtMs());
    const cgroup = group.cgroup === null ? "" : ` ${group.cgroup.dir}`;
    feed(`arm ${group.pgid} ${Math.max(1, Math.floor(left + graceFor()))}${cgroup}`);
  };

  /** The child's own cgroup, where this host lets us make one; said once when it does not. */
  let children = 0;
  let cgroupRefusal: string | null = null;
  const cgroupFor = (token: number): ChildCgroup | null => {
    if (cgroupRefusal !== null) return null;
    const made = ChildCgroup.create(`shardbridge-run.${shard}.${token}.${process.pid}.${++children}`);
    if (made instanceof ChildCgroup) return made;
    cgroupRefusal = made.unavailable;
    log.info("cgroup-unavailable", { reason: made.unavailable, fallback: "the child's process group" });
    return null;
  };

  /**
   * Stop the child: within what the lease leaves (graceFor) when it is lost, or, when
   * `graceful` and the lease is still held, within the stop grace while the keeper goes on
   * renewing — nova-compute finishes what it has begun (a reboot, a deploy) before the
   * lease is handed over; should the lease be lost meanwhile, the grace is cut to what it
   * leaves.
   */
  const stopChild = (why: string, graceful = false): Promise<unknown> => {
    if (child === null) {
      if (draining !== null) {
        log.warn("child-stop-hurried", { why, grace_ms: Math.round(graceFor()) });
        void draining.stop(graceFor());
      }
      return stopping;
    }
    const { group, token, resend } = child;
    resend?.stop();
    child = null;
    const drain = graceful && keeper.token() === token;
    const graceMs = drain ? (options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS) : graceFor();
    if (drain) draining = group;
    stopping = group.stop(graceMs).then(async (stopped) => {
      if (draining === group) draining = null;
      feed("disarm");
      log.info("child-stopped", {
        why,
        token,
        pid: group.pid,
        grace_ms: Math.round(graceMs),
        term_to_gone_ms: Math.round(stopped.goneAtMs - stopped.termAtMs),
        killed: stopped.killed,
        exit: exitStatus(stopped.exit),
      });
      // The child is gone: its fence goes (the next child's is made before it starts).
      await unfence(group, token);
    });
    return stopping;
  };

  // Up, and serving the shard, as the reference agent says it (POST /v1/agents/{id}/heartbeat),
  // standing by or active: the legacy pool counts only agents heard from within nova's
  // service_down_time, so without it a holder of a shard that is empty or being filled by
  // `migrate apply` would drop out of the pool, its ring share with it.
  const beat = () =>
    void client
      .heartbeat(id, [shard])
      .catch((error) => log.warn("heartbeat-error", { error: String(error) }));
  const heartbeats = setInterval(beat, HEARTBEAT_MS);
  beat();

  const finish = async (status: number) => {
    if (finishing) return;
    finishing = true;
    clearInterval(heartbeats);
    await stopChild("supervisor stopping", true);
    await keeper.stop();
    watchdog.stdin!.end();
    resolveDone(status);
  };

  const onChildExit = (group: ChildGroup, token: number, exit: ChildExit) => {
    if (group.stopRequested || finishing) return; // ours: stopChild reports it
    child?.resend?.stop();
    child = null;
    log.info("child-exited", { token, pid: group.pid, exit: exitStatus(exit) });
    // Whatever it left behind in its group or cgroup goes too, before the lease moves on.
    stopping = group.stop(graceFor()).then(() => {
      feed("disarm");
      return unfence(group, token);
    });
    void stopping.then(() => {
      if (options.restart && keeper.token() === token) return startChild(token);
      // The command is done: hand the lease back at once so a standby takes over.
      void finish(exitStatus(exit));
    });
  };

  const startChild = (token: number) => {
    const fenceKey = granted?.token === token ? granted.fenceKey : null;
    if (options.ironicEndpoint !== undefined && fenceKey === null) {
      // Not started: its Ironic client would be refused every call. A bridge that fronts
      // Ironic answers every grant with a key; this one did not (an older bridge behind the
      // same address?). Holding the lease with nothing running would keep the standby out:
      // hand it back and stop, as for a configuration error.
      log.error("child-not-started", {
        token,
        why: "the bridge granted the lease without a fence key for its Ironic endpoint: upgrade the bridge",
      });
      void finish(2);
      return;
    }
    const env: NodeJS.ProcessEnv = {
      ...(options.computeApi === undefined ? process.env : withoutOurCredentials(process.env)),
      SHARDBRIDGE_SHARD: shard,
      SHARDBRIDGE_TOKEN: String(token),
      SHARDBRIDGE_AGENT: id,
      // oslo.config's environment source (OS_<GROUP>__<OPTION>) wins over config files.
      OS_DEFAULT__HOST: options.serviceHost,
      OS_IRONIC__SHARD: shard,
      ...(options.ironicEndpoint !== undefined && {
        OS_IRONIC__ENDPOINT_OVERRIDE: options.ironicEndpoint(token, fenceKey!),
      }),
    };
    const cgroup = cgroupFor(token);
    // Fenced before it starts: the cgroup's rule is in place before any process is in it.
    const fence =
      options.egressFence !== true
        ? null
        : cgroup === null
          ? { unavailable: `no cgroup of its own for the child (${cgroupRefusal})` }
          : EgressFence.create(egressTable(shard, id), cgroup, expiryAtMs(), (error) =>
              log.error("egress-fence-error", { token, error }),
            );
    if (fence !== null && !(fence instanceof EgressFence)) {
      cgroup?.remove();
      log.error("child-not-started", { token, why: `run --egress-fence: ${fence.unavailable}` });
      void finish(2);
      return;
    }
    const group = new ChildGroup(
      options.command,
      env,
      `[${shard} token ${token}]`,
      nowMs,
      cgroup,
      fence === null ? undefined : () => resetConnections(fence, token),
    );
    if (fence !== null) fences.set(group, fence);
    const resend =
      options.computeApi === undefined
        ? null
        : new PreemptedResend({
            api: options.computeApi,
            host: options.serviceHost,
            log,
            holds: () => keeper.token() === token && child?.group === group,
            grantedAtMs: granted?.token === token ? granted.atMs : Date.now(),
          });
    child = { group, token, resend };
    void resend?.watch();
    arm();
    log.info("child-started", {
      token,
      pid: group.pid,
      command: options.command[0],
      cgroup: group.cgroup?.dir ?? null,
      egress_fence: fences.get(group)?.table ?? null,
    });
    if (options.ironicEndpoint === undefined)
      log.warn("child-unfenced", {
        token,
        why: "run --unfenced: the bridge fronts no Ironic, so the child's Ironic calls are not checked against the lease",
      });
    void group.exited.then((exit) => onChildExit(group, token, exit));
  };

  const answered = () => {
    if (undefinedShard.answered()) log.info("shard-defined-again");
  };
  keeper.on("active", ({ token, ttlMs, fenceKey }) => {
    answered();
    logTransition(log, { message: "active", token, ttl_ms: ttlMs });
    granted = { token, fenceKey, atMs: Date.now() };
    // A child of an earlier lease may still be stopping: it must be gone first.
    void stopping.then(() => {
      if (!finishing && keeper.token() === token && child === null) startChild(token);
    });
  });
  keeper.on("renewed", () => arm());
  keeper.on("standby", (e) => {
    answered();
    log.info("standby", { holder: e.current?.holder ?? null, reason: e.reason });
  });
  keeper.on("lost", ({ token, reason, detail }) => {
    logTransition(log, { message: "lost", token, reason, detail });
    void stopChild(`lease lost: ${reason}`);
  });
  keeper.on("released", ({ token }) => logTransition(log, { message: "released", token }));
  keeper.on("store-error", ({ op, error, cause }) => {
    // The store lost the shard's definition: nothing runs, said once, asked again less often.
    const undefinedNow = undefinedShard.verdict(cause);
    if (undefinedNow === "first")
      log.error("shard-undefined", { error, retry_max_ms: UNDEFINED_MAX_WAIT_MS });
    else if (undefinedNow === null) log.warn("store-error", { op, error });
  });
  keeper.start();

  return { done, stop: () => void finish(0) };
}
