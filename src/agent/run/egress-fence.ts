import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readlinkSync } from "node:fs";
import { relative } from "node:path";
import type { ChildCgroup } from "./cgroup.js";

/** Where nft looks up a `socket cgroupv2` path: below this folder. */
const CGROUP_FS = "/sys/fs/cgroup";

/**
 * The kernel's initial cgroup namespace as /proc/PID/ns/cgroup names it: its inode is
 * fixed (PROC_CGROUP_INIT_INO, 0xEFFFFFFB), so a process outside every cgroup namespace
 * reads exactly this.
 */
export const INITIAL_CGROUP_NAMESPACE = "cgroup:[4026531835]";

/**
 * Taken off the lease's earliest expiry for the fence's cut: the kernel counts an
 * element's timeout from nft's commit, a few milliseconds (more on a busy host) after the
 * supervisor read its clock, and the cut must come first.
 */
export const EGRESS_SLACK_MS = 250;

/**
 * The nftables script that makes (or replaces, in one transaction) the fence's table: a
 * set `alive` whose one element, the cgroup at `path` (relative to /sys/fs/cgroup; its
 * depth in the v2 hierarchy `level`), lives `timeoutMs`, and rules on the output hook for
 * every packet a socket of that cgroup sends while the element is not in the set. The
 * kernel drops the element when its timeout runs out (checked at each lookup, to the
 * kernel's tick); `egressRenewal` gives it a new one. Once cut:
 * - a TCP reset goes out. It carries nothing but the connection's end, and it is how the
 *   peer learns that a killed child's connection is gone: RabbitMQ requeues at once the
 *   messages it had delivered there unacknowledged (a reboot nova-api cast to the host),
 *   where it would otherwise wait for its next heartbeat write, up to half its heartbeat
 *   timeout later (30 s at oslo.messaging's default 60). The kernel resets a connection
 *   closed with data unread, as a process killed while frozen leaves a delivered message;
 * - a new connection (a bare SYN) is refused with a reset: it fails at once, where an
 *   ICMP error only makes the kernel send the SYN again a second later;
 * - the rest of TCP is dropped, not refused: a refusal resets the local socket without
 *   telling the peer, so the reset above would never be sent. The child's writes wait in
 *   its socket, never delivered, until it is killed;
 * - anything else is refused.
 * Pure.
 */
export function egressRules(table: string, path: string, level: number, timeoutMs: number): string {
  const cut = `socket cgroupv2 level ${level} ${JSON.stringify(path)} socket cgroupv2 level ${level} != @alive`;
  return [
    // Declared first so that the delete never fails on a table that is not there.
    `table inet ${table} {}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    `  set alive { typeof socket cgroupv2 level ${level}; flags timeout; }`,
    "  chain output {",
    "    type filter hook output priority filter; policy accept;",
    `    ${cut} tcp flags & rst == rst accept`,
    `    ${cut} tcp flags & (syn | ack) == syn counter reject with tcp reset`,
    `    ${cut} meta l4proto tcp counter drop`,
    `    ${cut} counter reject`,
    "  }",
    "}",
    ...aliveFor(table, path, timeoutMs),
    "",
  ].join("\n");
}

/** The script that gives the cgroup's element a new timeout (none at all when `timeoutMs` is not positive: cut now). Pure. */
export function egressRenewal(table: string, path: string, timeoutMs: number): string {
  return [`flush set inet ${table} alive`, ...aliveFor(table, path, timeoutMs), ""].join("\n");
}

const aliveFor = (table: string, path: string, timeoutMs: number): string[] =>
  timeoutMs >= 1
    ? [`add element inet ${table} alive { ${JSON.stringify(path)} timeout ${Math.floor(timeoutMs)}ms }`]
    : [];

/**
 * The fence's table for `agent` serving `shard`: one per shard on a host, so a new `run`
 * replaces what a killed one left; the agent in it keeps two supervisors of one shard on
 * one kernel (tests, a host running two agent ids) from replacing each other's.
 */
export function egressTable(shard: string, agent: string): string {
  const key = createHash("sha256").update(`${shard}\0${agent}`).digest("hex");
  return `shardbridge_run_${key.slice(0, 16)}`;
}

/**
 * `run --egress-fence`: the child's network cut by the kernel once the lease may have
 * moved on. The supervisor restates the deadline (the lease's earliest expiry, less
 * EGRESS_SLACK_MS) at every renew; if it cannot (frozen, starved, its host suspended, its
 * network gone), the set element's timeout runs out in the kernel and every packet a
 * process of the child's cgroup sends is stopped — to RabbitMQ, the conductor,
 * placement, Ironic — with no process of the host scheduled, but for TCP resets
 * (egressRules). What it cannot cover: what was sent before the cut and is still in
 * flight, and anything outside the child's cgroup.
 * The cgroup's level is counted from /proc/self/cgroup, which inside a cgroup namespace
 * starts at the namespace's root, not the kernel's: a rule made there would match nothing,
 * so no fence is made there at all (`create` says why, and the child is not started).
 */
export class EgressFence {
  /** the latest deadline asked for while one is being written, written next */
  private next: number | null = null;
  private writing: Promise<void> | null = null;
  /**
   * Whether the cgroup's sockets are known to be gone (resetConnections found none left):
   * until then, removing the table would let out what they still hold.
   */
  private socketsGone = false;
  /**
   * When the element last written runs out (ms of the epoch, a few ms early: the kernel
   * counts from nft's commit), where nothing the child sends passes any more.
   */
  private cutAtMs = 0;

  private constructor(
    readonly table: string,
    private readonly path: string,
    private readonly level: number,
    /** the cgroup's folder, as `ss` finds its sockets by it */
    private readonly dir: string,
    private readonly onError: (error: string) => void,
  ) {}

  /**
   * The fence for `cgroup` in `table`, in place with `deadlineMs` (the lease's earliest
   * expiry, ms of the epoch) before this returns — synchronously, so no process of the
   * cgroup ever runs unfenced — or why it cannot be made here.
   */
  static create(
    table: string,
    cgroup: ChildCgroup,
    deadlineMs: number,
    onError: (error: string) => void,
  ): EgressFence | { unavailable: string } {
    const namespace = cgroupNamespace();
    if (namespace !== INITIAL_CGROUP_NAMESPACE)
      return {
        unavailable:
          `this process is in a cgroup namespace (${namespace}), as in a container: the kernel ` +
          "matches a cgroup at its depth from the host's root, which cannot be read from here, " +
          "and a rule made here would let every packet through; run it in the host's cgroup namespace",
      };
    const path = relative(CGROUP_FS, cgroup.dir);
    if (path.startsWith("..")) return { unavailable: `the cgroup ${cgroup.dir} is not below ${CGROUP_FS}` };
    if (cgroup.level < 1) return { unavailable: `the cgroup ${cgroup.dir} is the hierarchy's root` };
    const ss = spawnSync("ss", ["-V"], { encoding: "utf8" });
    if (ss.error !== undefined)
      return {
        unavailable: `ss: ${ss.error.message} (iproute2's ss resets the connections a killed child leaves)`,
      };
    const fence = new EgressFence(table, path, cgroup.level, cgroup.dir, onError);
    const made = spawnSync("nft", ["-f", "-"], { input: fence.rules(deadlineMs), encoding: "utf8" });
    if (made.error !== undefined) return { unavailable: `nft: ${made.error.message}` };
    if (made.status !== 0) return { unavailable: `nft exited ${made.status}: ${made.stderr.trim()}` };
    fence.cutAtMs = EgressFence.cutAt(deadlineMs);
    return fence;
  }

  /** Where the element for `deadlineMs` (the lease's earliest expiry, ms of the epoch) runs out: the slack before it. */
  private static cutAt(deadlineMs: number): number {
    return deadlineMs - EGRESS_SLACK_MS;
  }

  /** From now (read as the script is made) to the cut: the element's timeout. */
  private static timeoutTo(deadlineMs: number): number {
    return EgressFence.cutAt(deadlineMs) - Date.now();
  }

  private rules(deadlineMs: number): string {
    return egressRules(this.table, this.path, this.level, EgressFence.timeoutTo(deadlineMs));
  }

  /** Move the deadline (the lease's earliest expiry, ms of the epoch): one write at a time, the latest wins. */
  set(deadlineMs: number): void {
    this.next = deadlineMs;
    if (this.writing === null) this.writing = this.drain();
  }

  private async drain(): Promise<void> {
    while (this.next !== null) {
      const deadlineMs = this.next;
      this.next = null;
      const { error } = await nft(
        ["-f", "-"],
        egressRenewal(this.table, this.path, EgressFence.timeoutTo(deadlineMs)),
      );
      if (error !== null) this.onError(error);
      else this.cutAtMs = EgressFence.cutAt(deadlineMs);
    }
    this.writing = null;
  }

  /**
   * Once no process of the cgroup remains, before the cgroup goes: every TCP connection its
   * sockets left ended with a reset (`ss -K`, the kernel's SOCK_DESTROY), which the rules
   * let out, and what is left of them counted. A child killed after the cut leaves its
   * connections holding what it wrote after the cut, dropped and queued, with its FIN
   * queued behind: the peer learns nothing until it writes there itself (RabbitMQ keeps a
   * message it had delivered there unacknowledged, which the woken nova-compute read before
   * the KILL, until its next heartbeat write, up to half oslo.messaging's
   * `heartbeat_timeout_threshold` later). And once the table goes, the kernel would send
   * that queue on: the reset purges it. Sockets left (a kernel without
   * CONFIG_INET_DIAG_DESTROY closes none, and ss says nothing of it) keep the table (remove).
   * A child gone before the cut (a graceful stop under the held lease) had nothing stopped:
   * its connections end as it left them, with nothing reset (`cut: false`).
   */
  async resetConnections(): Promise<{ cut: false } | { reset: number; left: number } | { error: string }> {
    if (Date.now() < this.cutAtMs) {
      this.socketsGone = true;
      return { cut: false };
    }
    const reset = await command("ss", ["-K", "-t", "-n", "-H", "cgroup", "=", this.dir], "", SS_TIMEOUT_MS);
    if (reset.error !== null) return { error: reset.error };
    // TIME-WAIT holds nothing to send, and a reset cannot end it: not counted.
    const listed = await command(
      "ss",
      ["-t", "-n", "-H", "exclude", "time-wait", "cgroup", "=", this.dir],
      "",
      SS_TIMEOUT_MS,
    );
    if (listed.error !== null) return { error: listed.error };
    const left = lines(listed.stdout);
    this.socketsGone = left === 0;
    return { reset: lines(reset.stdout), left };
  }

  /**
   * The table removed, once any write under way has ended, unless sockets of the cgroup
   * may be left (resetConnections did not find them gone): then it stays, its element
   * renewed no more and gone by the lease's expiry at the latest, stopping what they hold,
   * until the shard's next child on this host replaces it. How many packets of the child
   * its rules stopped (what a process that outlived its lease tried to send), null when the
   * table could not be read; whether it was kept.
   */
  async remove(): Promise<{ stopped: number | null; kept: boolean }> {
    this.next = null;
    await this.writing;
    const listed = await nft(["list", "table", "inet", this.table]);
    const stopped = listed.error === null ? rejectedPackets(listed.stdout) : null;
    if (!this.socketsGone) return { stopped, kept: true };
    const removed = await nft(["-f", "-"], `table inet ${this.table} {}\ndelete table inet ${this.table}\n`);
    if (removed.error !== null) this.onError(removed.error);
    return { stopped, kept: false };
  }
}

/** How long `ss` may take before it is killed: a child's end (and the lease's hand-off) waits on it. */
const SS_TIMEOUT_MS = 5000;

const lines = (text: string): number => text.split("\n").filter((line) => line.trim() !== "").length;

/** This process's cgroup namespace; a kernel without them (before Linux 4.6) has only the initial one. */
function cgroupNamespace(): string {
  try {
    return readlinkSync("/proc/self/ns/cgroup");
  } catch {
    return INITIAL_CGROUP_NAMESPACE;
  }
}

/** The packets an `nft list table` of the fence counts as stopped (refused or dropped): its rules' counters, summed. Pure. */
export function rejectedPackets(listing: string): number {
  return [...listing.matchAll(/counter packets (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** nft with `args` (and `input` on its stdin): what it printed, and what went wrong if it failed. */
const nft = (args: string[], input = "") => command("nft", args, input);

/**
 * `name` with `args` (and `input` on its stdin), KILLed after `timeoutMs` if given: what it
 * printed, and what went wrong if it failed.
 */
function command(
  name: string,
  args: string[],
  input = "",
  timeoutMs?: number,
): Promise<{ stdout: string; error: string | null }> {
  return new Promise((resolve) => {
    const child = spawn(name, args, {
      stdio: ["pipe", "pipe", "pipe"],
      ...(timeoutMs === undefined ? {} : { timeout: timeoutMs, killSignal: "SIGKILL" as const }),
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", (error) => resolve({ stdout, error: `${name}: ${error.message}` }));
    child.on("close", (status, signal) => {
      const how = signal === null ? `exited ${status}` : `killed (${signal})`;
      resolve({ stdout, error: status === 0 ? null : `${name} ${how}: ${stderr.trim()}` });
    });
    // A command gone before it read its input (killed, or failed to start) closes the pipe:
    // the write's EPIPE would otherwise be thrown out of run's loop. Its exit says what failed.
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
  });
}
