import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/**
 * The floor of any Node HTTP service on this machine: bare `node:http`, keep-alive, that
 * reads the request's JSON body, parses it and answers a small JSON document. It runs in a
 * process of its own (started the way the bridge is, `node --import tsx`), so a bench can
 * drive it with the same load generator and read its CPU apart.
 *
 *   node --import tsx test/bench/echo-server.ts --serve   (prints {"port":N} when listening)
 */

export interface EchoServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

function serve(): void {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let parsed: unknown = null;
      let status = 200;
      if (chunks.length > 0) {
        try {
          parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          status = 400;
        }
      }
      const body = JSON.stringify(
        status === 200
          ? { ok: true, method: req.method, path: req.url, echo: parsed }
          : { errors: [{ status, code: "echo.body.malformed" }] },
      );
      res.writeHead(status, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(body),
      });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    if (typeof address !== "object" || address === null) throw new Error("echo server: no address");
    process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
  });
  process.once("SIGTERM", () => {
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 1000).unref();
  });
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** Start the echo server in a child process on a free loopback port. */
export async function startEchoServer(): Promise<EchoServer> {
  const script = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ["--import", "tsx", script, "--serve"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("echo server did not start within 15 s")), 15_000);
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`echo server exited with ${code}`)));
    createInterface({ input: child.stdout! }).once("line", (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { port: number }).port);
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

if (process.argv.includes("--serve")) serve();
