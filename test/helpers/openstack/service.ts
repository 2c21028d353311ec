import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { running } from "../processes.js";

/** Every service group started and not yet stopped: killed if the test process exits first. */
const live = new Set<number>();
process.once("exit", () => {
  for (const group of live) {
    try {
      process.kill(-group, "SIGKILL");
    } catch {
      // gone already
    }
  }
});

/**
 * One OpenStack service (Ironic, placement, nova-conductor) in a process group of its own,
 * its output in `log`. `stop` ends the whole group: TERM, then KILL after `graceMs`.
 */
export class Service {
  private constructor(
    readonly name: string,
    readonly log: string,
    private readonly child: ChildProcess,
  ) {}

  static start(
    name: string,
    command: string,
    args: string[],
    log: string,
    env: NodeJS.ProcessEnv = {},
  ): Service {
    const out = openSync(log, "a");
    const child = spawn(command, args, {
      detached: true,
      stdio: ["ignore", out, out],
      env: { ...process.env, ...env },
    });
    closeSync(out);
    live.add(child.pid!);
    return new Service(name, log, child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Poll `ready` every 200 ms until it is true; fail with the log's tail if the service dies or `timeoutMs` passes. */
  async until(ready: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (this.exited) throw new Error(`${this.name} exited during start-up:\n${this.tail()}`);
      if (await ready().catch(() => false)) return;
      if (performance.now() > deadline)
        throw new Error(`${this.name} not ready within ${timeoutMs} ms:\n${this.tail()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  tail(lines = 30): string {
    try {
      return readFileSync(this.log, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  async stop(graceMs = 10_000): Promise<void> {
    const group = this.child.pid!;
    const signal = (s: NodeJS.Signals) => {
      try {
        process.kill(-group, s);
      } catch {
        // the group is gone
      }
    };
    signal("SIGCONT");
    signal("SIGTERM");
    const deadline = performance.now() + graceMs;
    while (running(group) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    signal("SIGKILL");
    while (running(group)) await new Promise((r) => setTimeout(r, 20));
    live.delete(group);
  }
}
