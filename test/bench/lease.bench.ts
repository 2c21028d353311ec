import { MemoryTraits } from "../../src/traits/memory.js";
import { MemoryNodes } from "../../src/nodes/memory.js";
import { openStore } from "../../src/store/open.js";
import { spawnSync } from "node:child_process";
import { MemoryBackend } from "../../src/store/memory.js";
import { Store } from "../../src/store/store.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { renewLoop } from "./renew-loop.js";
import { printTable, type Measured } from "./stats.js";

/**
 * Lease renew through the Store API on Redis, beside redis-benchmark running a trivial
 * EVALSHA against the same private server in the same run, plus the memory backend.
 */

const RENEWS = Number(process.env.BENCH_RENEWS ?? 100_000);
const CONCURRENCY = [1, 8];

/** redis-benchmark's own numbers for `EVALSHA <return 1> 0` with `clients` connections. */
function rawEvalsha(server: TestRedisServer, sha: string, clients: number, requests: number): Measured {
  const run = spawnSync(
    "redis-benchmark",
    [
      "-h",
      "127.0.0.1",
      "-p",
      String(server.port),
      "-n",
      String(requests),
      "-c",
      String(clients),
      "--csv",
      "EVALSHA",
      sha,
      "0",
    ],
    { encoding: "utf8" },
  );
  if (run.status !== 0) throw new Error(`redis-benchmark failed: ${run.stderr}`);
  // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  const last = run.stdout.trim().split("\n").pop()!;
  const fields = last.split(",").map((f) => f.replace(/"/g, ""));
  return { opsPerSec: Number(fields[1]), p50Ms: Number(fields[4]), p99Ms: Number(fields[6]) };
}

export async function leaseBench(): Promise<void> {
  const server = await TestRedisServer.start();
  try {
    const admin = server.client();
    const sha = (await admin.script("LOAD", "return 1")) as string;
    admin.disconnect();
    const store = await openStore(server.url);
    await renewLoop(() => store, 5000, 8); // warm up: JIT, script cache
    const rows: Array<Array<string | number>> = [];
    for (const concurrency of CONCURRENCY) {
      const raw = rawEvalsha(server, sha, concurrency, RENEWS);
      const ours = await renewLoop(() => store, RENEWS, concurrency);
      rows.push(
        [
          `redis-benchmark EVALSHA (c=${concurrency})`,
          raw.opsPerSec,
          raw.p50Ms,
          raw.p99Ms,
          "1.00 (baseline)",
        ],
        [
          `Store.renew on redis (c=${concurrency})`,
          ours.opsPerSec,
          ours.p50Ms,
          ours.p99Ms,
          (ours.opsPerSec / raw.opsPerSec).toFixed(2),
        ],
      );
    }
    await store.close();

    const memory = new Store(new MemoryBackend(), new MemoryNodes(), new MemoryTraits());
    await renewLoop(() => memory, 50_000, 8);
    const mem = await renewLoop(() => memory, RENEWS * 5, 8);
    const rawBest = rows[2]![1] as number;
    rows.push([
      "Store.renew on memory (c=8)",
      mem.opsPerSec,
      mem.p50Ms,
      mem.p99Ms,
      (mem.opsPerSec / rawBest).toFixed(2),
    ]);
    printTable(
      `Lease renew: ${RENEWS.toLocaleString("en-US")} renews per row, private redis-server on loopback (ratio = ops/s over redis-benchmark EVALSHA at the same concurrency)`,
      ["what", "ops/s", "p50 ms", "p99 ms", "ratio"],
      rows,
    );
  } finally {
    await server.stop();
  }
}
