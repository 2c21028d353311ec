import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { constants } from "node:os";
import { createInterface } from "node:readline";
import type { ChildCgroup } from "./cgroup.js";
import { GroupMembers, groupOf } from "./group-members.js";

/** How a child ended: its exit code, or the signal that ended it. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * What stopping a child took: when TERM went out (with no grace, the KILL), whether KILL
 * was needed, when it was gone.
 */
export interface StopReport {
  termAtMs: number;
  killed: boolean;
  goneAtMs: number;
  exit: ChildExit;
}

/** The exit status a shell would give: the code, or 128 + the signal's number. */
export function exitStatus(exit: ChildExit): number {
  if (exit.code !== null) return exit.code;
  return 128 + (exit.signal === null ? 0 : constants.signals[exit.signal]);
}

/**
 * How often a stop looks whether the group is gone: the lease waits on that look, and a
 * look costs a few /proc reads (see GroupMembers).
 */
const LOOK_MS = 2;

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  signalPid(-pgid, signal);
}

/** Signal a process (or, negative, a group) that may be gone already. */
function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // gone already
  }
}

/**
 * The command `shardbridge run` guards, in a process group of its own (a new session:
 * a signal to the group reaches every process it started, `sh -c` wrappers included),
 * and in a cgroup of its own where one can be made (then even a process that leaves the
 * group, a daemon that calls setsid(), is stopped with it), started through `setpriv
 * --pdeathsig KILL` so that the kernel kills it the moment its supervisor dies, however
 * it dies. Each line it writes goes to our stdout or stderr with `prefix` in front, so
 * an operator can tell which incarnation wrote it.
 */
export class ChildGroup {
  readonly pid: number;
  readonly exited: Promise<ChildExit>;
  private readonly child: ChildProcess;
  private readonly members: GroupMembers;
  private stopping: Promise<StopReport> | null = null;
  /** when a stop KILLs what is left (nowMs's clock) */
  private killAtMs = Infinity;

  constructor(
    command: string[],
    env: NodeJS.ProcessEnv,
    prefix: string,
    private readonly nowMs: () => number,
    /** the child's own cgroup, or null to rely on its process group alone */
    readonly cgroup: ChildCgroup | null = null,
    /** run once a stop finds no process of it left, before its cgroup goes (what its sockets left, ended) */
    private readonly onGone: () => Promise<void> = () => Promise.resolve(),
  ) {
    const wrapped = cgroup === null ? command : cgroup.wrap(command);
    // Capabilities `run` holds for itself (CAP_NET_ADMIN for --egress-fence, given by the
    // unit's AmbientCapabilities=) would pass to the child through the ambient set: cleared.
    const setpriv = ["--pdeathsig", "KILL", "--inh-caps=-all", "--ambient-caps=-all", "--"];
    this.child = spawn("setpriv", [...setpriv, ...wrapped], {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    if (this.child.pid === undefined) throw new Error(`could not start ${command[0]}`);
    this.pid = this.child.pid;
    this.members = new GroupMembers(this.pid);
    this.exited = new Promise((resolve) =>
      this.child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    for (const [from, to] of [
      [this.child.stdout!, process.stdout],
      [this.child.stderr!, process.stderr],
    ] as const) {
      createInterface({ input: from, crlfDelay: Infinity }).on("line", (line) =>
        to.write(`${prefix} ${line}\n`),
      );
    }
  }

  /** The group's id: the child leads its own group. */
  get pgid(): number {
    return this.pid;
  }

  /**
   * Whether anything of it still runs: in its process group, or in its cgroup (which
   * lists no zombies either).
   */
  private alive(): boolean {
    return this.members.running() || (this.cgroup !== null && this.cgroup.pids().length > 0);
  }

  /**
   * TERM the whole group (and whatever else is in its cgroup), KILL all of it after
   * `graceMs` if anything is left (with no grace, KILL at once: no TERM), and answer once
   * no process of it remains. Called again, answers the same stop, KILLing sooner if the
   * new grace ends first (a graceful stop whose lease was lost meanwhile).
   */
  stop(graceMs: number): Promise<StopReport> {
    this.killAtMs = Math.min(this.killAtMs, this.nowMs() + graceMs);
    this.stopping ??= (async () => {
      const termAtMs = this.nowMs();
      // No grace (a lease already past its expiry): no TERM, the KILL below at once. A TERM
      // would let the child's handler run for as long as the first look takes (a /proc scan:
      // 14 ms on a loaded 2-core machine), beside its successor: a bash trap ends in that.
      if (graceMs > 0) {
        // One TERM each: the group's, then the cgroup's processes that left the group. A
        // second TERM can land while the first one's handler still runs, and nova-compute
        // 34 (oslo.service's threading backend) then stops inside its own stop: its
        // graceful shutdown hangs until it is KILLed (py-spy showed the two handlers nested).
        signalGroup(this.pgid, "SIGTERM");
        for (const pid of this.cgroup?.pids() ?? [])
          if (groupOf(pid) !== this.pgid) signalPid(pid, "SIGTERM");
      }
      // The group decides, not the leader: a grandchild may hold on after it is gone.
      while (this.alive() && this.nowMs() < this.killAtMs) await sleep(LOOK_MS);
      const killed = this.alive();
      if (killed) {
        signalGroup(this.pgid, "SIGKILL");
        this.cgroup?.kill();
      }
      const exit = await this.exited;
      while (this.alive()) await sleep(LOOK_MS);
      await this.onGone();
      this.cgroup?.remove();
      return { termAtMs, killed, goneAtMs: this.nowMs(), exit };
    })();
    return this.stopping;
  }

  /** Whether stop() was called: an exit after it is ours, not the command's own. */
  get stopRequested(): boolean {
    return this.stopping !== null;
  }
}
