import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { coalesceWrites } from "../../src/store/redis/coalesce.js";

/**
 * The floor of any Node HTTP service on this machine: bare `node:http`, keep-alive, that
 * reads the request's JSON body, parses it and answers a small JSON document. It runs in a
 * process of its own (started the way the bridge is, `node --import tsx`), so a bench can
 * drive it with the same load generator and read its CPU apart.
 *
 * With `--redis URL` each answer also waits for one script call on that Redis, a lease
 * renew's worth of work (read the holder's token, write it, set the expiry), by EVALSHA
 * with the writes of one loop turn sent together as the bridge sends them
 * (src/store/redis/coalesce.ts): the floor of a Node service that renews a lease in Redis per
 * request the bridge's way, with nothing else to do.
 *
 * With `--answer-bytes N` every answer is instead one JSON document of exactly N bytes,
 * made once at start: the floor of a Node service answering a large list it keeps ready
 * (the node list's kept listings), where the bytes through the socket are the cost.
 *
 * With `--redis URL --fleet-list FILE` it answers a fleet of agents the least a lease
 * service could (the scale bench's floor): every lease write and heartbeat one script
 * call on that Redis and a small JSON answer, a waiting acquire held for its wait and
 * answered "held" (at a moment in its last fifth, as the bridge spreads them), and every
 * node list the bytes of FILE, kept.
 *
 *   node --import tsx test/bench/echo-server.ts --serve [--redis URL [--fleet-list FILE] | --answer-bytes N]
 *   (prints {"port":N} when listening)
 */

/** A grant's or a heartbeat's worth of Redis work: write the fields, set the expiry. */
const WRITE_LIKE_LUA = `
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'holder', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

/** A renew's worth: compare the token, then write as WRITE_LIKE_LUA does. */
const RENEW_LIKE_LUA = `
local held = redis.call('HGET', KEYS[1], 'token')
if held and held ~= ARGV[1] then return 0 end${WRITE_LIKE_LUA}`;

interface RenewLike {
  renewLike(key: string, token: string, holder: string, ttlMs: number): Promise<number>;
  writeLike(key: string, token: string, holder: string, ttlMs: number): Promise<number>;
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
  /** with redisUrl: answer a fleet's requests, every node list this file's bytes */
  fleetList?: string;
}

/** A JSON document of exactly `bytes` bytes (at least 10). */
function keptAnswer(bytes: number): Buffer {
  const frame = '{"pad":""}';
  return Buffer.from(`{"pad":"${"n".repeat(Math.max(0, bytes - frame.length))}"}`);
}

function redisFor(url: string): RenewLike {
  const redis = new Redis(url);
  coalesceWrites(redis);
  redis.defineCommand("renewLike", { numberOfKeys: 1, lua: RENEW_LIKE_LUA });
  redis.defineCommand("writeLike", { numberOfKeys: 1, lua: WRITE_LIKE_LUA });
  return redis as unknown as RenewLike;
}

const FLEET_TTL_MS = 6000;
const LEASE_PATH = /^\/v1\/shards\/([^/]+)\/lease$/;
const AGENT_PATH = /^\/v1\/agents\/([^/]+)\/(heartbeat|nodes)(?:\?|$)/;

/** The fleet floor (see the top): the least work a lease service does for each request of a fleet. */
function serveFleet(redis: RenewLike, list: Buffer): Server {
  let lastToken = 0;
  return createServer((req, res) => {
    const json = (status: number, body?: unknown) => {
      const bytes = body === undefined ? "" : JSON.stringify(body);
      res.writeHead(status, {
        ...(bytes !== "" && { "content-type": "application/json; charset=utf-8" }),
        "content-length": Buffer.byteLength(bytes),
      });
      res.end(bytes);
    };
    const held = (shard: string) =>
      json(409, { errors: [{ status: 409, code: "shardbridge.lease.held", detail: `${shard} is held` }] });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const lease = LEASE_PATH.exec(req.url ?? "");
      const agentPath = AGENT_PATH.exec(req.url ?? "");
      if (req.method === "GET" && agentPath?.[2] === "nodes") {
        res.writeHead(200, {
          "content-type": "application/json; charset=utf-8",
          "content-length": list.length,
        });
        return res.end(list);
      }
      const body = (chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {}) as {
        agent?: string;
        token?: number;
        wait_ms?: number;
      };
      if (req.method === "POST" && agentPath?.[2] === "heartbeat") {
        return void redis.writeLike(`floor:agent:${agentPath[1]}`, "seen", agentPath[1]!, 60_000).then(
          () => json(204),
          () => json(503),
        );
      }
      if (lease === null) return json(404);
      const shard = lease[1]!;
      if (req.method === "DELETE") return json(204);
      if (body.wait_ms !== undefined) {
        // Answered "held" at a moment in the wait's last fifth, or dropped when the client goes.
        const timer = setTimeout(() => held(shard), body.wait_ms * (0.8 + 0.2 * Math.random()));
        return void res.once("close", () => clearTimeout(timer));
      }
      const token = body.token ?? ++lastToken;
      const key = `floor:lease:${shard}`;
      (body.token === undefined
        ? redis.writeLike(key, String(token), String(body.agent), FLEET_TTL_MS)
        : redis.renewLike(key, String(token), String(body.agent), FLEET_TTL_MS)
      ).then(
        (ok) =>
          ok === 1 ? json(200, { shard, holder: body.agent, token, ttl_ms: FLEET_TTL_MS }) : held(shard),
        () => json(503),
      );
    });
  });
}

/** The echo: the request's JSON back, after one renew-like script with `redis`; or `kept`'s bytes. */
function echo(redis: RenewLike | undefined, kept: Buffer | undefined): Server {
  return createServer((req, res) => {
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
      redis.renewLike(`floor:${req.url}`, String(token), String(agent), 60_000).then(
        (renewed) => respond(renewed === 1 ? 200 : 409, parsed),
        () => respond(503, null),
      );
    });
  });
}

function serve({ redisUrl, answerBytes, fleetList }: EchoOptions): void {
  const kept = answerBytes === undefined ? undefined : keptAnswer(answerBytes);
  const redis = redisUrl === undefined ? undefined : redisFor(redisUrl);
  const server =
    redis !== undefined && fleetList !== undefined
      ? serveFleet(redis, readFileSync(fleetList))
      : echo(redis, kept);
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
    ...(options.fleetList === undefined ? [] : ["--fleet-list", options.fleetList]),
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
    createInterface({ input: child.stdout }).once("line", (line) => {
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
    fleetList: valueOf("--fleet-list"),
  });
}
