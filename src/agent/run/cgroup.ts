import { mkdirSync, readFileSync, rmdirSync, writeFileSync, accessSync, constants } from "node:fs";
import { join } from "node:path";

/**
 * A cgroup (v2) of the child's own, under the supervisor's cgroup. A process group holds
 * only the processes that stay in it: a daemon that double-forks and calls setsid()
 * leaves it, and a signal to the group misses it. Nothing leaves a cgroup by itself, and
 * `cgroup.kill` (Linux 5.14) ends every process in it at once. Made where the cgroup v2
 * hierarchy is writable (root, or a systemd unit with `Delegate=yes`); elsewhere the
 * process group is what is killed, and `create` says why.
 */
export class ChildCgroup {
  private constructor(
    readonly dir: string,
    /** its depth in the v2 hierarchy (the root is 0), as the kernel counts it outside a cgroup namespace */
    readonly level: number,
  ) {}

  /** A new cgroup named `name` under this process's own, or why none can be made here. */
  static create(name: string): ChildCgroup | { unavailable: string } {
    const root = cgroup2Mount();
    if (root === null) return { unavailable: "no cgroup v2 hierarchy is mounted" };
    const own = ownCgroupPath();
    if (own === null) return { unavailable: "this process is in no cgroup v2 cgroup" };
    const dir = join(root.mountPoint, relativeTo(own, root.root), name);
    try {
      mkdirSync(dir);
      accessSync(join(dir, "cgroup.procs"), constants.W_OK);
    } catch (error) {
      return { unavailable: `cannot make ${dir}: ${(error as NodeJS.ErrnoException).code ?? String(error)}` };
    }
    return new ChildCgroup(dir, own.split("/").filter(Boolean).length + 1);
  }

  /**
   * `command` prefixed so that its first process moves itself into the cgroup before it
   * becomes the command: nothing it starts can run outside it, not even for an instant.
   */
  wrap(command: string[]): string[] {
    return ["/bin/sh", "-c", 'echo 0 > "$0/cgroup.procs" || exit 126; exec "$@"', this.dir, ...command];
  }

  /** The pids in the cgroup now. */
  pids(): number[] {
    try {
      return readFileSync(join(this.dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** KILL everything in it: at once through cgroup.kill, one by one on older kernels. */
  kill(): void {
    try {
      writeFileSync(join(this.dir, "cgroup.kill"), "1");
      return;
    } catch {
      // no cgroup.kill before Linux 5.14
    }
    for (const pid of this.pids()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
  }

  /** Remove the (empty) cgroup; answers whether it is gone. */
  remove(): boolean {
    try {
      rmdirSync(this.dir);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "ENOENT";
    }
  }
}

/** Where the cgroup v2 hierarchy is mounted, and which of its cgroups the mount shows as its root. */
function cgroup2Mount(): { mountPoint: string; root: string } | null {
  let mountinfo: string;
  try {
    mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return null;
  }
  // "36 35 0:31 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw": root and mount point
  // are fields 4 and 5; the filesystem type is the first field after " - ".
  for (const line of mountinfo.split("\n")) {
    const [before, after] = line.split(" - ");
    if (after === undefined || after.split(" ")[0] !== "cgroup2") continue;
    const fields = before!.split(" ");
    return { root: unescapeMountPath(fields[3]!), mountPoint: unescapeMountPath(fields[4]!) };
  }
  return null;
}

/** This process's cgroup in the v2 hierarchy: the "0::PATH" line of /proc/self/cgroup. */
function ownCgroupPath(): string | null {
  try {
    const line = readFileSync("/proc/self/cgroup", "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"));
    return line === undefined ? null : line.slice(3);
  } catch {
    return null;
  }
}

/** `path` as seen below the mount's root (a container may mount a subtree). */
function relativeTo(path: string, root: string): string {
  if (root === "/" || !path.startsWith(root)) return path;
  return path.slice(root.length) || "/";
}

/** mountinfo writes space, tab, newline and backslash as octal escapes. */
function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}
