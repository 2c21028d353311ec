import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./free-port.js";

const running = new Set<ChildProcess>();
const dirs = new Set<string>();
// Whatever a run left behind goes with the process: servers and their directories.
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * A private redis-server: its own free port, no persistence, its own directory; never
 * the machine's Redis. `restart()` kills it with SIGKILL and starts a new empty one on the
 * same port, the way a crashed Redis without persistence comes back. Used by the tests
 * and by `shardbridge chaos`.
 */
export class PrivateRedisServer {
  private child: ChildProcess | null = null;
  private readonly dir = mkdtempSync(join(tmpdir(), "sb-redis-"));

  private constructor(
    readonly port: number,
    /** the port of the master this server replicates at start, if any */
    private readonly replicaOf: number | null,
  ) {
    dirs.add(this.dir);
  }

  /** A server of its own; with `replicaOf`, a replica of the server on that port (loopback). */
  static async start(options: { replicaOf?: number } = {}): Promise<PrivateRedisServer> {
    const server = new PrivateRedisServer(await freePort(), options.replicaOf ?? null);
    await server.launch();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  private async launch(): Promise<void> {
    const child = spawn(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        this.dir,
        "--protected-mode",
        "yes",
        ...(this.replicaOf === null ? [] : ["--replicaof", "127.0.0.1", String(this.replicaOf)]),
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    running.add(child);
    child.once("exit", () => running.delete(child));
    // No redis-server on the PATH: say so at once rather than after the wait for its port.
    let spawnError: Error | null = null;
    child.once("error", (error) => (spawnError = error));
    this.child = child;
    await this.waitUntilReady(() => spawnError);
  }

  private async waitUntilReady(failed: () => Error | null): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const error = failed();
      if (error !== null)
        throw new Error(
          `cannot start redis-server (${error.message}): install it, e.g. apt-get install redis-server`,
        );
      const probe = new Redis(this.port, "127.0.0.1", {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      probe.on("error", () => undefined);
      try {
        await probe.connect();
        await probe.ping();
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`redis-server on ${this.port} did not start: ${String(error)}`);
        await new Promise((r) => setTimeout(r, 25));
      } finally {
        probe.disconnect();
      }
    }
  }

  /** A plain client for set-up and inspection. */
  client(): Redis {
    const client = new Redis(this.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    client.on("error", () => undefined);
    return client;
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    this.child = null;
  }

  /** SIGKILL and start again empty on the same port. */
  async restart(): Promise<void> {
    await this.kill();
    await this.launch();
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
    dirs.delete(this.dir);
  }
}
