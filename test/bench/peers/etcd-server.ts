import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../helpers/redis-server.js";

/** The etcd on the PATH, as it names its version ("3.4.23"). */
export function etcdVersion(): string {
  const out = spawnSync("etcd", ["--version"], { encoding: "utf8" });
  return /^etcd Version: (\S+)/m.exec(out.stdout ?? "")?.[1] ?? "(version unknown)";
}

/** Whatever a run left behind goes with this process: the servers and their folders. */
const leftovers = new Set<EtcdServer>();
process.once("exit", () => {
  for (const server of leftovers) server.kill();
});

/**
 * One etcd member (Debian's etcd-server) on loopback free ports, its data in a fresh
 * temporary folder; fsync as etcd does it by default, as an operator would run it.
 */
export class EtcdServer {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {
    leftovers.add(this);
  }

  static async start(): Promise<EtcdServer> {
    if (spawnSync("etcd", ["--version"]).error !== undefined)
      throw new Error("the peers bench needs etcd: apt-get install etcd-server (make bench installs it)");
    // A free port can be taken by another process before etcd binds it (a shared machine): try new ones.
    for (let attempt = 1; ; attempt++) {
      try {
        return await EtcdServer.launch();
      } catch (error) {
        if (attempt === 3) throw error;
      }
    }
  }

  private static async launch(): Promise<EtcdServer> {
    const dir = mkdtempSync(join(tmpdir(), "sb-etcd-"));
    const client = `http://127.0.0.1:${await freePort()}`;
    const peer = `http://127.0.0.1:${await freePort()}`;
    const child = spawn(
      "etcd",
      [
        ...["--name", "bench", "--data-dir", join(dir, "data")],
        ...["--listen-client-urls", client, "--advertise-client-urls", client],
        ...["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer],
        ...["--initial-cluster", `bench=${peer}`, "--initial-cluster-state", "new"],
        ...["--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"],
      ],
      { stdio: ["ignore", "ignore", "inherit"] },
    );
    const server = new EtcdServer(client, child, dir);
    try {
      await server.untilHealthy();
      return server;
    } catch (error) {
      await server.stop();
      throw error;
    }
  }

  get pid(): number {
    return this.child.pid!;
  }

  private async untilHealthy(): Promise<void> {
    const deadline = performance.now() + 30_000;
    for (;;) {
      if (this.child.exitCode !== null) throw new Error(`etcd exited with ${this.child.exitCode}`);
      try {
        const answer = (await (await fetch(`${this.url}/health`)).json()) as { health?: string };
        if (answer.health === "true") return;
      } catch {
        // not listening yet
      }
      if (performance.now() > deadline) throw new Error("etcd did not become healthy within 30 s");
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  kill(): void {
    this.child.kill("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
    leftovers.delete(this);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((r) => this.child.once("exit", r));
      this.child.kill("SIGKILL");
      await exited;
    }
    this.kill();
  }
}
