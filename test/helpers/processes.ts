import { ChildCgroup } from "../../src/agent/run/cgroup.js";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { AgentProcess } from "./agent-process.js";

/**
 * A process that runs, as the kernel sees it: there, and not a zombie waiting to be
 * reaped (`kill -0` would still find a zombie).
 */
export function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Whether this host lets a process make a cgroup of its own (cgroup v2, writable): made once and removed. */
export function cgroupsWritable(): boolean {
  const probe = ChildCgroup.create(`shardbridge-test-probe.${process.pid}`);
  if (!(probe instanceof ChildCgroup)) return false;
  probe.remove();
  return true;
}

/**
 * A `run` supervisor's whole host stopped at once: the supervisor's group (it and its
 * watchdog) and its latest child's (a session of its own), as a suspended VM or a starved
 * host would be. `wake` resumes the child first and the supervisor `supervisorLagMs` later
 * (starved longer: meanwhile nothing on the host can stop the child).
 */
export function freezeHost(supervisor: AgentProcess): {
  child: number;
  wake(supervisorLagMs?: number): Promise<void>;
} {
  const child = Number(supervisor.events.filter((e) => e.ev === "child-started").at(-1)!.pid);
  const group = supervisor.child.pid!;
  process.kill(-group, "SIGSTOP");
  process.kill(-child, "SIGSTOP");
  return {
    child,
    wake: async (supervisorLagMs = 0) => {
      process.kill(-child, "SIGCONT");
      if (supervisorLagMs > 0) await new Promise((r) => setTimeout(r, supervisorLagMs));
      process.kill(-group, "SIGCONT");
    },
  };
}

/** The pids of `pid`'s children now (its main thread's, as /proc lists them). */
export function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
    .trim()
    .split(" ")
    .filter(Boolean)
    .map(Number);
}

/**
 * Every 10 ms, which of the processes `pids()` names are running: each instant two were
 * is one entry of `overlaps` ("pid/label and pid/label"). `stop` ends the watch and kills
 * whatever is left of them.
 */
export function watchOverlaps(pids: () => Array<{ pid: number; label: string }>): {
  overlaps: string[];
  stop: () => void;
} {
  const overlaps: string[] = [];
  const poller = setInterval(() => {
    const alive = pids().filter((p) => running(p.pid));
    if (alive.length > 1) overlaps.push(alive.map((p) => `${p.pid}/${p.label}`).join(" and "));
  }, 10);
  return {
    overlaps,
    stop: () => {
      clearInterval(poller);
      for (const { pid } of pids()) if (running(pid)) process.kill(pid, "SIGKILL");
    },
  };
}

/** One change of the watched processes: when, and each one's parent and state (the kernel's letter). */
export interface ProcessTableLook {
  at: number;
  procs: Array<{ pid: number; ppid: number; state: string }>;
}

/** Stopped (SIGSTOP, or a tracer's stop): it does nothing until woken. */
const stopped = (state: string) => state === "T" || state === "t";

/**
 * The services of one look: each watched process whose parent is not one (a launcher that
 * forks its worker is one service with it), and whether any process of it runs.
 */
export function servicesOf(look: ProcessTableLook): Array<{ pid: number; running: boolean }> {
  const byPid = new Map(look.procs.map((p) => [p.pid, p]));
  const rootOf = (pid: number): number => {
    let at = byPid.get(pid)!;
    while (byPid.has(at.ppid) && at.ppid !== at.pid) at = byPid.get(at.ppid)!;
    return at.pid;
  };
  const running = new Map<number, boolean>();
  for (const p of look.procs) {
    const root = rootOf(p.pid);
    running.set(root, (running.get(root) ?? false) || !stopped(p.state));
  }
  return [...running].map(([pid, r]) => ({ pid, running: r }));
}

/**
 * The processes whose program is `command` (or the script an interpreter runs) and whose environment holds every
 * pair of `env`, read from the kernel's process table every 10 ms by a process of its own
 * (test/helpers/proc-watch.mjs): whoever started them, with no pid named by a supervisor.
 * `timeline` is each change, in order.
 */
export class ProcessTableWatch {
  readonly timeline: ProcessTableLook[] = [];
  private readonly child: ChildProcess;
  private readonly ready: Promise<void>;

  private constructor(match: { command: string; env: Record<string, string> }) {
    this.child = spawn(
      process.execPath,
      [fileURLToPath(new URL("proc-watch.mjs", import.meta.url)), JSON.stringify(match)],
      {
        stdio: ["pipe", "pipe", "inherit"],
      },
    );
    let buffered = "";
    this.ready = new Promise((resolve, reject) => {
      this.child.once("error", reject);
      this.child.stdout!.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        let end: number;
        while ((end = buffered.indexOf("\n")) >= 0) {
          this.timeline.push(JSON.parse(buffered.slice(0, end)) as ProcessTableLook);
          buffered = buffered.slice(end + 1);
          resolve();
        }
      });
    });
  }

  /** Watching once this resolves (its first look printed). */
  static async start(match: { command: string; env: Record<string, string> }): Promise<ProcessTableWatch> {
    const watch = new ProcessTableWatch(match);
    await watch.ready;
    return watch;
  }

  /**
   * The looks, from the one in effect at `since` on, at which two or more services ran (a
   * service: a watched process and the watched processes below it; it ran unless every one
   * of them was stopped — a SIGSTOPped process does nothing until woken).
   */
  runningTogether(since = 0): ProcessTableLook[] {
    return this.from(since).filter((l) => servicesOf(l).filter((s) => s.running).length > 1);
  }

  /** The same looks, said: "time pid (state) and pid (state)" for each watched process. */
  overlaps(since = 0): string[] {
    return this.runningTogether(since).map(
      (l) =>
        `${new Date(l.at).toISOString()} ${l.procs.map((p) => `${p.pid}<${p.ppid} (${p.state})`).join(" and ")}`,
    );
  }

  /**
   * What a host frozen at `frozenAt` and woken at `wokenAt` may show: no look, before the
   * wake, at which two services ran (a stopped one does nothing), and `woken` among those
   * at every look after it (it ran beside the new one only until its supervisor's KILL).
   * Said as problems, none when it held; and how long the woken one ran (ms).
   */
  frozenHostOverlaps(
    frozenAt: number,
    woken: { pid: number; at: number },
  ): { problems: string[]; besideMs: number } {
    const problems: string[] = [];
    for (const l of this.runningTogether(frozenAt))
      if (l.at < woken.at) problems.push(`before the SIGCONT, two ran: ${JSON.stringify(l.procs)}`);
      else if (!l.procs.some((p) => p.pid === woken.pid))
        problems.push(
          `after the SIGCONT, two ran without the woken ${woken.pid}: ${JSON.stringify(l.procs)}`,
        );
    return { problems, besideMs: (this.lastSeen(woken.pid) ?? woken.at) - woken.at };
  }

  /** When `pid` was last seen (ms of the epoch: the next look's time, or now if it still is); null if never. */
  lastSeen(pid: number): number | null {
    let i = this.timeline.length - 1;
    while (i >= 0 && !this.timeline[i]!.procs.some((p) => p.pid === pid)) i--;
    if (i < 0) return null;
    return this.timeline[i + 1]?.at ?? Date.now();
  }

  /** The pids seen at or after `since`. */
  pids(since = 0): number[] {
    return [...new Set(this.from(since).flatMap((l) => l.procs.map((p) => p.pid)))];
  }

  /** The looks from the one in effect at `since` (the last before it) on. */
  private from(since: number): ProcessTableLook[] {
    let first = 0;
    for (let i = 0; i < this.timeline.length && this.timeline[i]!.at <= since; i++) first = i;
    return this.timeline.slice(first);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.stdin!.end();
    await exited;
  }
}
