import { MemoryTraits } from "../../src/store/memory/traits.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { openStore } from "../../src/store/open.js";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import { Store } from "../../src/store/store.js";
import { coalesceWrites } from "../../src/store/redis/coalesce.js";
import { keyLayout } from "../../src/store/redis/keys.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { loadScripts } from "./peers/redis-lock.js";
import { renewLoop } from "./renew-loop.js";
import { closedLoop, percentile, printTable, type Measured } from "./stats.js";

/**
 * Lease renew through the Store API on Redis, beside redis-benchmark running a trivial
 * EVALSHA against the same private server in the same run, plus the memory backend.
 * Between the two, the Node floor: the same trivial EVALSHA through ioredis on a
 * connection set up as the Store's (its writes of a turn coalesced), in this process —
 * what any Node service pays for one script call with this client, before a renew's own
 * script, arguments and logic.
 *
 * The VM's speed drifts within seconds when other work shares its two cores, so each row
 * is run in SLICES slices, every row's alternating, and the ratio is
 * the median of the ratios of neighbouring slices (their range beside it): a burst of
 * load then lands on one pair, not on one side of the comparison. The CPU columns say
 * where a renew's time went: Redis's (INFO cpu) for both rows, this process's for the
 * Store's.
 *
 * Two more rows bound what any Lua renew can reach here: the least a renew under the
 * lineage rule asks of Redis (least-renew.lua), sent with the Store's arguments through
 * bare ioredis, once on a connection corked as the Store's and once on a plain one,
 * where each call is its own write and Redis starts on the first while Node encodes the
 * next (the two sides overlap; corked they take turns). A last row is what a renew costs
 * without the lineage rule at all: a Redis lock's compare-and-extend on the corked
 * connection, the script `make bench peers` runs for that peer.
 */

const RENEWS = Number(process.env.BENCH_RENEWS ?? 100_000);
const SLICES = Number(process.env.BENCH_LEASE_SLICES ?? 5);
const CONCURRENCY = [1, 8];

/** One slice, with the CPU each side spent on it (µs per op). */
interface Slice extends Measured {
  redisUs: number;
  clientUs: number | null;
}

/** CPU seconds redis-server has used so far (user + system). */
async function redisCpuS(admin: Redis): Promise<number> {
  const info = await admin.info("cpu");
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1]);
  return field("used_cpu_user") + field("used_cpu_sys");
}

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

/**
 * A closed loop of `concurrency` renews of least-renew.lua through `client`, each caller
 * on its own shard granted by `store` (so the hash holds what the shipped scripts wrote),
 * with the store's lineage as the Store's client keeps it (`prefix`: its shards' names).
 */
async function leastRenews(
  store: Store,
  admin: Redis,
  client: Redis,
  concurrency: number,
  prefix: string,
): Promise<(ops: number) => Promise<Measured>> {
  const sha = (await admin.script(
    "LOAD",
    readFileSync(new URL("./least-renew.lua", import.meta.url), "utf8"),
  )) as string;
  const replid = /^master_replid:(\w+)/m.exec(await admin.info("replication"))?.[1];
  if (replid === undefined) throw new Error("INFO replication has no master_replid");
  const [seconds, micros] = (await admin.time()) as [number | string, number | string];
  // Confirmed an hour from now: the script's window check runs, and never fails mid-run.
  const confirmedUs = Number(seconds) * 1e6 + Number(micros) + 3600e6;
  const keys = keyLayout();
  const leases: Array<[string, string, number]> = [];
  for (let c = 0; c < concurrency; c++) {
    const shard = `${prefix}-${c}`;
    const agent = `${prefix}-agent-${c}`;
    const token = await acquireWhenReady(store, shard, agent);
    const renewed = await store.renew({ shard, agent, token, ttlMs: 60_000 });
    if (!renewed.ok) throw new Error(`renew of ${shard} refused: ${renewed.reason}`);
    leases.push([keys.lease(shard), agent, token]);
  }
  return (ops) =>
    closedLoop(ops, concurrency, async (i) => {
      const [key, agent, token] = leases[i % concurrency]!;
      const reply = (await client.evalsha(
        sha,
        1,
        key,
        agent,
        token,
        60_000,
        "",
        "0",
        replid,
        confirmedUs,
      )) as [number, string];
      if (reply[0] !== 1) throw new Error(`least renew refused: ${reply[1]}`);
    });
}

/**
 * A closed loop of `concurrency` renews of the Redis lock's compare-and-extend
 * (peers/redis-lock.ts, as redlock-style libraries send it) through `client`: a renew with
 * no lineage rule, no fencing token and a bare integer for a reply — what the lineage rule
 * and the lease's fields cost is the distance from this row to the least renew script's.
 */
async function lockExtends(
  admin: Redis,
  client: Redis,
  concurrency: number,
  prefix: string,
): Promise<(ops: number) => Promise<Measured>> {
  const { extend } = await loadScripts(admin);
  for (let c = 0; c < concurrency; c++)
    await admin.set(`${prefix}-${c}`, `${prefix}-agent-${c}`, "PX", 3_600_000);
  return (ops) =>
    closedLoop(ops, concurrency, async (i) => {
      const c = i % concurrency;
      const extended = await client.evalsha(extend, 1, `${prefix}-${c}`, `${prefix}-agent-${c}`, 60_000);
      if (extended !== 1) throw new Error(`the lock's extend refused: ${String(extended)}`);
    });
}

/** `run` measured with the CPU Redis and (for a run in this process) this process spent on it. */
async function sliceOf(
  admin: Redis,
  ops: number,
  inProcess: boolean,
  run: () => Promise<Measured> | Measured,
): Promise<Slice> {
  const redisBefore = await redisCpuS(admin);
  const before = process.cpuUsage();
  const measured = await run();
  const spent = process.cpuUsage(before);
  const redisUs = ((await redisCpuS(admin)) - redisBefore) * 1e6;
  return {
    ...measured,
    redisUs: redisUs / ops,
    clientUs: inProcess ? (spent.user + spent.system) / ops : null,
  };
}

const median = (values: number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
const us = (n: number | null) => (n === null ? "" : n.toFixed(1));

export async function leaseBench(): Promise<void> {
  const server = await TestRedisServer.start();
  try {
    const admin = server.client();
    const sha = (await admin.script("LOAD", "return 1")) as string;
    const store = await openStore(server.url);
    const floorClient = server.client();
    coalesceWrites(floorClient);
    const plainClient = server.client();
    await renewLoop(() => store, 5000, 8); // warm up: JIT, script cache
    const perSlice = Math.ceil(RENEWS / SLICES);
    const rows: Array<Array<string | number>> = [];
    let rawBest = 0;
    for (const concurrency of CONCURRENCY) {
      const raw: Slice[] = [];
      const floor: Slice[] = [];
      const ours: Slice[] = [];
      const leastCorked: Slice[] = [];
      const leastPlain: Slice[] = [];
      const lock: Slice[] = [];
      const lockExtend = await lockExtends(admin, floorClient, concurrency, "lock-corked");
      const corkedLeast = await leastRenews(store, admin, floorClient, concurrency, "least-corked");
      const plainLeast = await leastRenews(store, admin, plainClient, concurrency, "least-plain");
      for (let s = 0; s < SLICES; s++) {
        raw.push(await sliceOf(admin, perSlice, false, () => rawEvalsha(server, sha, concurrency, perSlice)));
        floor.push(
          await sliceOf(admin, perSlice, true, () =>
            closedLoop(perSlice, concurrency, () => floorClient.evalsha(sha, 0)),
          ),
        );
        ours.push(await sliceOf(admin, perSlice, true, () => renewLoop(() => store, perSlice, concurrency)));
        leastCorked.push(await sliceOf(admin, perSlice, true, () => corkedLeast(perSlice)));
        leastPlain.push(await sliceOf(admin, perSlice, true, () => plainLeast(perSlice)));
        lock.push(await sliceOf(admin, perSlice, true, () => lockExtend(perSlice)));
      }
      /** the median over neighbouring slices of `slices`' ops/s over the baseline's, and their range */
      const ratioTo = (slices: Slice[], base: Slice[]) => {
        const ratios = slices.map((o, s) => o.opsPerSec / base[s]!.opsPerSec).sort((a, b) => a - b);
        return `${median(ratios).toFixed(2)} (${ratios[0]!.toFixed(2)}-${ratios.at(-1)!.toFixed(2)})`;
      };
      const row = (what: string, slices: Slice[], ratio: string) => [
        `${what} (c=${concurrency})`,
        median(slices.map((s) => s.opsPerSec)),
        median(slices.map((s) => s.p50Ms)),
        median(slices.map((s) => s.p99Ms)),
        ratio,
        us(median(slices.map((s) => s.redisUs))),
        us(slices[0]!.clientUs === null ? null : median(slices.map((s) => s.clientUs!))),
      ];
      rows.push(
        row("redis-benchmark EVALSHA", raw, "1.00 (baseline)"),
        row("ioredis EVALSHA, the Node floor", floor, ratioTo(floor, raw)),
        row("Store.renew on redis", ours, ratioTo(ours, raw)),
        [`  Store.renew over the Node floor (c=${concurrency})`, "", "", "", ratioTo(ours, floor), "", ""],
        row("least renew script, corked", leastCorked, ratioTo(leastCorked, raw)),
        row("least renew script, uncorked", leastPlain, ratioTo(leastPlain, raw)),
        row("a Redis lock's extend, corked", lock, ratioTo(lock, raw)),
        [
          `  least renew script over the lock's extend (c=${concurrency})`,
          "",
          "",
          "",
          ratioTo(leastCorked, lock),
          "",
          "",
        ],
      );
      rawBest = median(raw.map((s) => s.opsPerSec));
    }
    await store.close();
    floorClient.disconnect();
    plainClient.disconnect();
    admin.disconnect();

    const memory = new Store(new MemoryLeases(), new MemoryNodes(), new MemoryTraits());
    await renewLoop(() => memory, 50_000, 8);
    const mem = await renewLoop(() => memory, RENEWS * 5, 8);
    rows.push([
      "Store.renew on memory (c=8)",
      mem.opsPerSec,
      mem.p50Ms,
      mem.p99Ms,
      (mem.opsPerSec / rawBest).toFixed(2),
      "",
      "",
    ]);
    printTable(
      `Lease renew: ${RENEWS.toLocaleString("en-US")} renews per row in ${SLICES} slices, the baseline's, the Node floor's, the Store's, the least renew script's (corked, uncorked) and a Redis lock's compare-and-extend (no lineage rule, no token) alternating, private redis-server on loopback (ops/s, p50, p99: the slices' medians; ratio: the median over neighbouring slices of ops/s over redis-benchmark EVALSHA at the same concurrency — the Store's also over the Node floor's — their range in brackets; CPU µs per op)`,
      ["what", "ops/s", "p50 ms", "p99 ms", "ratio", "Redis CPU", "Node CPU"],
      rows,
    );
  } finally {
    await server.stop();
  }
}
