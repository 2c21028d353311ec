import { readFileSync } from "node:fs";

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
