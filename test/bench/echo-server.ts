import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { coalesceWrites } from "../../src/redis/coalesce.js";

/**
 * The floor of any Node HTTP service on this machine: bare `node:http`, keep-alive, that
 * reads the request's JSON body, parses it and answers a small JSON document. It runs in a
 * process of its own (started the way the bridge is, `node --import tsx`), so a bench can
 * drive it with the same load generator and read its CPU apart.
 *
 * With `--redis URL` each answer also waits for one script call on that Redis, a lease
 * renew's worth of work (read the holder's token, write it, set the expiry), by EVALSHA
 * with the writes of one loop turn sent together as the bridge sends them
 * (src/redis/coalesce.ts): the floor of a Node service that renews a lease in Redis per
 * request the bridge's way, with nothing else to do.
 *
 * With `--answer-bytes N` every answer is instead one JSON document of exactly N bytes,
 * made once at start: the floor of a Node service answering a large list it keeps ready
 * (the node list's kept listings), where the bytes through the socket are the cost.
 *
 *   node --import tsx test/bench/echo-server.ts --serve [--redis URL | --answer-bytes N]
 *   (prints {"port":N} when listening)
 */

/** A renew's worth of Redis work: compare the token, write it, set the expiry. */
const RENEW_LIKE_LUA = `
local held = redis.call('HGET', KEYS[1], 'token')
if held and held ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'holder', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

interface RenewLike {
  renewLike(key: string, token: string, holder: string, ttlMs: number): Promise<number>;
}

export interface EchoServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface EchoOptions {
  /** each answer waits for one renew-like script on this Redis */
  redisUrl?: string;
  /** each answer is one kept JSON document of this many bytes */
  answerBytes?: number;
}

/** A JSON document of exactly `bytes` bytes (at least 10). */
function keptAnswer(bytes: number): Buffer {
  const frame = '{"pad":""}';
  return Buffer.from(`{"pad":"${"n".repeat(Math.max(0, bytes - frame.length))}"}`);
}

function serve({ redisUrl, answerBytes }: EchoOptions): void {
  const kept = answerBytes === undefined ? undefined : keptAnswer(answerBytes);
  const redis = redisUrl === undefined ? undefined : new Redis(redisUrl);
  if (redis !== undefined) {
    coalesceWrites(redis);
    redis.defineCommand("renewLike", { numberOfKeys: 1, lua: RENEW_LIKE_LUA });
  }
  const server = createServer((req, res) => {
    const respond = (status: number, parsed: unknown) => {
      const body = JSON.stringify(
        status === 200
          ? { ok: true, method: req.method, path: req.url, echo: parsed }
          : { errors: [{ status, code: `echo.status_${status}` }] },
      );
      res.writeHead(status, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(body),
      });
      res.end(body);
    };
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let parsed: unknown = null;
      if (chunks.length > 0) {
        try {
          parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          return respond(400, null);
        }
      }
      if (kept !== undefined) {
        res.writeHead(200, { "content-type": "application/json", "content-length": kept.length });
        return res.end(kept);
      }
      // The plain echo answers on this turn, with no promise in its way.
      if (redis === undefined) return respond(200, parsed);
      const { agent, token } = (parsed ?? {}) as { agent?: unknown; token?: unknown };
      (redis as unknown as RenewLike)
        .renewLike(`floor:${req.url}`, String(token), String(agent), 60_000)
        .then(
          (renewed) => respond(renewed === 1 ? 200 : 409, parsed),
          () => respond(503, null),
        );
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

/** Start the echo server in a child process on a free loopback port (options: see above). */
export async function startEchoServer(options: EchoOptions = {}): Promise<EchoServer> {
  const script = fileURLToPath(import.meta.url);
  const args = [
    ...(options.redisUrl === undefined ? [] : ["--redis", options.redisUrl]),
    ...(options.answerBytes === undefined ? [] : ["--answer-bytes", String(options.answerBytes)]),
  ];
  const child = spawn(process.execPath, ["--import", "tsx", script, "--serve", ...args], {
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

if (process.argv.includes("--serve")) {
  const valueOf = (flag: string) => {
    const at = process.argv.indexOf(flag);
    return at === -1 ? undefined : process.argv[at + 1];
  };
  const answerBytes = valueOf("--answer-bytes");
  serve({
    redisUrl: valueOf("--redis"),
    answerBytes: answerBytes === undefined ? undefined : Number(answerBytes),
  });
}
