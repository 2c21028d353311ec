import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SHARDBRIDGE } from "./cli.js";

/**
 * One JSON line from a child, plus when this process read it (monotonic ms). `ev` is the
 * event name: the test fixture's `ev`, or a winston line's `message`.
 */
export interface AgentEvent {
  ev: string;
  agent: string;
  t: number;
  seenAt: number;
  [field: string]: unknown;
}

const fixture = fileURLToPath(new URL("../fixtures/lease-agent.ts", import.meta.url));
const children = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

/** A lease agent in a child process, its events collected as they arrive. */
export class AgentProcess {
  readonly events: AgentEvent[] = [];
  /** everything it wrote on stderr so far (also passed on to this process's, named) */
  stderr = "";
  private readonly waiters = new Set<() => void>();
  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      try {
        const parsed = JSON.parse(line) as AgentEvent & { message?: string };
        this.events.push({ ...parsed, ev: parsed.ev ?? parsed.message ?? "", seenAt: performance.now() });
        // An error it logged is shown as it comes, named: a failing test's message names events only.
        if (parsed.level === "error") process.stderr.write(`[${name}] ${line}\n`);
      } catch {
        return; // not an event line
      }
      for (const wake of this.waiters) wake();
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      this.stderr += chunk.toString();
      process.stderr.write(`[${name}] ${chunk.toString()}`);
    });
  }

  /** The lease test fixture (test/fixtures/lease-agent.ts) on a store. */
  static spawn(name: string, storeUrl: string, extra: string[] = []): AgentProcess {
    return AgentProcess.spawnFixture(name, ["--store", storeUrl, "--agent", name, ...extra]);
  }

  /** The lease test fixture with arguments of the caller's choosing (e.g. --bridge). */
  static spawnFixture(name: string, args: string[]): AgentProcess {
    return AgentProcess.spawnTs(name, fixture, args);
  }

  /** The shardbridge command itself (see SHARDBRIDGE), e.g. `serve` or `agent`; `nodeFlags` go to node. */
  static cli(
    name: string,
    args: string[],
    env: NodeJS.ProcessEnv = {},
    nodeFlags: string[] = [],
  ): AgentProcess {
    return AgentProcess.spawnCommand(
      name,
      SHARDBRIDGE.command,
      [...nodeFlags, ...SHARDBRIDGE.args, ...args],
      env,
    );
  }

  private static spawnTs(
    name: string,
    script: string,
    args: string[],
    env: NodeJS.ProcessEnv = {},
  ): AgentProcess {
    return AgentProcess.spawnCommand(name, process.execPath, ["--import", "tsx", script, ...args], env);
  }

  /** Any program that prints JSON lines. */
  static spawnCommand(
    name: string,
    command: string,
    args: string[],
    env: NodeJS.ProcessEnv = {},
  ): AgentProcess {
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    children.add(child);
    child.once("exit", () => children.delete(child));
    return new AgentProcess(name, child);
  }

  /** Resolve with the first event (at or after index `from`) that matches, or fail after `timeoutMs`. */
  waitFor(match: (e: AgentEvent) => boolean, timeoutMs: number, from = 0): Promise<AgentEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.events.slice(from).find(match);
        if (found === undefined) return false;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(
          new Error(
            `${this.name}: no matching event within ${timeoutMs} ms; saw ${this.events.map((e) => e.ev).join(",")}`,
          ),
        );
      }, timeoutMs);
      // A wait nobody needs any more (the loser of a race) must not hold the run open.
      timer.unref();
      if (!check()) this.waiters.add(check);
    });
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  async exited(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    await new Promise((r) => this.child.once("exit", r));
  }

  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited();
  }
}
