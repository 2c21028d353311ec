/**
 * Loaded into a bridge under a bench (`NODE_OPTIONS=--import .../loop-probe.mjs`): tells apart the two things an event-loop delay is made of on a shared machine.
 * Every millisecond a timer reads how long the bridge's main thread has been on a CPU
 * (/proc/thread-self/schedstat, kernel time included) and how long it waited for one;
 * between two ticks the loop did not turn, so
 *   - the wall time between ticks is the delay a renew would have seen (what
 *     monitorEventLoopDelay reports at /metrics), and
 *   - the main thread's CPU time in that gap is how long the bridge's own work (its code,
 *     GC on the main thread, syscalls) held the loop; the rest of the gap it waited for a
 *     core, for GC helper threads, or the VM did not run it.
 * On SIGUSR2 it appends the longest of each since the last SIGUSR2 to the file named by
 * SHARDBRIDGE_LOOP_PROBE_FILE, one JSON line, and starts again.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { isMainThread } from "node:worker_threads";

const file = process.env.SHARDBRIDGE_LOOP_PROBE_FILE;
if (isMainThread && file !== undefined) {
  // Linux only; elsewhere (or with the kernel's sched_info off: it reads zeros) the gaps
  // are still measured and the CPU columns read null.
  const SCHEDSTAT = "/proc/thread-self/schedstat";
  const readable = existsSync(SCHEDSTAT) && readFileSync(SCHEDSTAT, "utf8").trim() !== "0 0 0";
  const schedstat = () => {
    if (!readable) return [NaN, NaN];
    // The kernel brings a running thread's CPU time up to date only at a scheduler tick
    // (4 ms at HZ=250) or a switch, so a plain read is off by up to a tick; getrusage
    // (process.cpuUsage) updates the calling thread's first, and the read is exact.
    process.cpuUsage();
    return readFileSync(SCHEDSTAT, "utf8").split(" ").map(Number);
  };
  let worst = { gapMs: 0, onCpuMs: 0, waitedMs: 0 };
  let lastAt = performance.now();
  let [lastCpuNs, lastWaitNs] = schedstat();
  setInterval(() => {
    const at = performance.now();
    const [cpuNs, waitNs] = schedstat();
    const gapMs = at - lastAt;
    worst = {
      gapMs: Math.max(worst.gapMs, gapMs),
      onCpuMs: Math.max(worst.onCpuMs, Math.min(gapMs, (cpuNs - lastCpuNs) / 1e6)),
      waitedMs: Math.max(worst.waitedMs, (waitNs - lastWaitNs) / 1e6),
    };
    [lastAt, lastCpuNs, lastWaitNs] = [at, cpuNs, waitNs];
  }, 1).unref();
  process.on("SIGUSR2", () => {
    appendFileSync(file, `${JSON.stringify(worst)}\n`);
    worst = { gapMs: 0, onCpuMs: 0, waitedMs: 0 };
  });
}
