import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { ProcessTableWatch } from "../helpers/processes.js";
import { until } from "../helpers/until.js";

/*
 * The watch the nova tests hold "one nova-compute per shard" with (helpers/proc-watch.mjs):
 * it must see processes nobody named to it, a child that execs its command after its fork,
 * and tell a stopped process from one that runs. Real processes, matched as the nova tests
 * match (command line and environment).
 */
describe("the process-table watch (real processes)", function () {
  this.timeout(30_000);
  const marker = `sbw_${randomBytes(4).toString("hex")}`;
  const started: ChildProcess[] = [];
  let watch: ProcessTableWatch;

  /** `sleep 30` with the marker in its environment, optionally only after `execAfterMs` as a python3 process. */
  const start = (execAfterMs = 0): ChildProcess => {
    const child =
      execAfterMs === 0
        ? spawn("sleep", ["30"], { env: { ...process.env, WATCHED: marker } })
        : spawn(
            "python3",
            [
              "-c",
              `import os, select; select.select([], [], [], ${execAfterMs / 1000}); os.execvp("sl" + "eep", ["sl" + "eep", "30"])`,
            ],
            { env: { ...process.env, WATCHED: marker } },
          );
    started.push(child);
    return child;
  };
  const seen = (pid: number) => watch.timeline.at(-1)?.procs.find((p) => p.pid === pid)?.state;

  before(async () => {
    watch = await ProcessTableWatch.start({ command: "sleep", env: { WATCHED: marker } });
  });
  after(async () => {
    for (const c of started) c.kill("SIGKILL");
    await watch?.stop();
  });

  it("sees two matching processes nobody named, and each look where both ran", async () => {
    const since = Date.now();
    const [a, b] = [start(), start()];
    await until(
      "both seen",
      async () => [seen(a.pid!), seen(b.pid!)],
      (s) => s.every((x) => x !== undefined),
      10_000,
      20,
    );
    expect(watch.overlaps(since), "looks where both ran").to.not.deep.equal([]);
    a.kill("SIGKILL");
    b.kill("SIGKILL");
    await until(
      "both gone",
      async () => [seen(a.pid!), seen(b.pid!)],
      (s) => s.every((x) => x === undefined),
      10_000,
      20,
    );
  });

  it("a stopped process does not count as running beside another; woken, it does", async () => {
    const [a, b] = [start(), start()];
    a.kill("SIGSTOP");
    await until(
      "a stopped, b seen",
      async () => [seen(a.pid!), seen(b.pid!)],
      ([x, y]) => x === "T" && y !== undefined,
      10_000,
      20,
    );
    const stoppedSince = watch.timeline.at(-1)!.at;
    expect(watch.overlaps(stoppedSince), "looks while one of the two was stopped").to.deep.equal([]);
    const wokenAt = Date.now();
    a.kill("SIGCONT");
    await until(
      "a woken",
      async () => seen(a.pid!),
      (x) => x !== undefined && x !== "T",
      10_000,
      20,
    );
    expect(watch.overlaps(wokenAt), "looks once both ran").to.not.deep.equal([]);
    expect(
      watch.frozenHostOverlaps(stoppedSince, { pid: a.pid!, at: wokenAt }).problems,
      "a frozen, then woken beside b",
    ).to.deep.equal([]);
    // What a violation reads like: two ran before the wake (looks from before the stop), or
    // two ran after it without the woken one among them.
    expect(
      watch.frozenHostOverlaps(0, { pid: a.pid!, at: wokenAt }).problems.join("\n"),
      "looks from before a was stopped (this file's first case's among them)",
    ).to.match(/before the SIGCONT, two ran/);
    expect(
      watch.frozenHostOverlaps(stoppedSince, { pid: process.pid, at: wokenAt }).problems.join("\n"),
      "another pid named as the woken one",
    ).to.match(/after the SIGCONT, two ran without the woken/);
    a.kill("SIGKILL");
    b.kill("SIGKILL");
  });

  it("a child that execs the command after its fork (as run's child execs nova-compute) is seen, under the same pid", async () => {
    const child = start(500);
    await until(
      "the exec'd child seen",
      async () => seen(child.pid!),
      (x) => x !== undefined,
      10_000,
      20,
    );
    expect(watch.pids()).to.include(child.pid);
    child.kill("SIGKILL");
  });

  it("a process that forks a worker of the same program (a launcher and its worker) is one service, not two running", async () => {
    const forking = await ProcessTableWatch.start({ command: "python3", env: { WATCHED: marker } });
    try {
      const launcher = spawn(
        "python3",
        ["-c", "import os, select; os.fork(); select.select([], [], [], 30)"],
        { env: { ...process.env, WATCHED: marker } },
      );
      started.push(launcher);
      await until(
        "the launcher and its worker seen",
        async () => forking.timeline.at(-1)?.procs ?? [],
        (p) => p.length === 2,
        10_000,
        20,
      );
      expect(forking.overlaps(), "looks at which two services ran").to.deep.equal([]);
      const worker = forking.timeline.at(-1)!.procs.find((p) => p.ppid === launcher.pid);
      expect(worker, "the worker, its parent the launcher").to.not.equal(undefined);
      process.kill(worker!.pid, "SIGKILL");
      launcher.kill("SIGKILL");
    } finally {
      await forking.stop();
    }
  });

  it("a process without the environment's pair is not one of them", async () => {
    const other = spawn("sleep", ["30"], { env: { ...process.env, WATCHED: `${marker}-other` } });
    started.push(other);
    const mine = start();
    await until(
      "mine seen",
      async () => seen(mine.pid!),
      (x) => x !== undefined,
      10_000,
      20,
    );
    await new Promise((r) => setTimeout(r, 100));
    expect(watch.pids(), "pids seen").to.not.include(other.pid);
    mine.kill("SIGKILL");
  });
});
