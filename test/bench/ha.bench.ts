import { spawnSync } from "node:child_process";
import { LeaseKeeper } from "../../src/core/keeper/lease-keeper.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { ClusterSetup, SentinelSetup } from "../helpers/redis-topology.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { renewLoop } from "./renew-loop.js";
import { closedLoop, percentile, printTable, type Measured } from "./stats.js";
import calculateSlot from "cluster-key-slot";
import { Cluster } from "ioredis";
import { closeClient, parseRedisSpec, redisClient } from "../../src/store/redis/connect.js";
import { leaseConnectionOptions } from "../../src/store/redis/connection.js";

/**
 * Leases on replicated Redis (#14): what a renew costs through the Store on Sentinel (the
 * script, then WAIT for a replica) and on Cluster, beside one redis-server and a bare
 * EVALSHA measured in the same run; and how long each Redis fault leaves a shard without
 * a holder, median and worst of ROUNDS.
 */

const RENEWS = Number(process.env.BENCH_HA_RENEWS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_HA_ROUNDS ?? 5);
const CONCURRENCY = [1, 8];
/** The lease TTL of the failover rounds: the hold a new master imposes is one TTL. */
const TTL_MS = 2000;
const SHARD = "rack-ha";
/** #32: a holder again within the store's recovery + one TTL (the hold) + this. */
const HOLDER_GOAL_OVER_TTL_MS = 500;

/** redis-benchmark's own numbers for a bare `EVALSHA <return 1> 0` with `clients` connections. */
function bareEvalsha(port: number, sha: string, clients: number, requests: number): Measured {
  // prettier-ignore
  const run = spawnSync(
    "redis-benchmark",
    ["-h", "127.0.0.1", "-p", String(port), "-n", String(requests), "-c", String(clients), "--csv", "EVALSHA", sha, "0"],
    { encoding: "utf8" },
  );
  if (run.status !== 0) throw new Error(`redis-benchmark failed: ${run.stderr}`);
  // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  const fields = run.stdout
    .trim()
    .split("\n")
    .pop()!
    .split(",")
    .map((f) => f.replace(/"/g, ""));
  return { opsPerSec: Number(fields[1]), p50Ms: Number(fields[4]), p99Ms: Number(fields[6]) };
}

/**
 * What any replicated renew waits for, without the lease rules: a bare `EVALSHA` and a
 * `WAIT 1` sent together on one connection to the master, as the Store sends a renew and
 * its WAIT (same client options), `concurrency` callers. On Sentinel the master it names;
 * on a Cluster each caller's own key's master (the keys spread over the masters as the
 * shards' do), its `EVALSHA` naming the key.
 */
async function scriptAndWait(spec: string, total: number, concurrency: number): Promise<Measured> {
  const client = redisClient(parseRedisSpec(spec)!, leaseConnectionOptions(2000));
  client.on("error", () => undefined);
  await client.connect();
  try {
    const masters = client instanceof Cluster ? client.nodes("master") : [client];
    const shas = await Promise.all(masters.map((node) => node.script("LOAD", "return 1") as Promise<string>));
    const callers = Array.from({ length: concurrency }, (_, c) => {
      const key = `floor:{${c}}`;
      if (!(client instanceof Cluster)) return { node: client, key };
      const nodeKey = client.slots[calculateSlot(key)]![0];
      return { node: masters.find((n) => `${n.options.host}:${n.options.port}` === nodeKey)!, key };
    });
    return await closedLoop(total, concurrency, (i) => {
      const { node, key } = callers[i % concurrency]!;
      return Promise.all([node.evalsha(shas[0]!, 1, key), node.wait(1, 250)]);
    });
  } finally {
    closeClient(client);
  }
}

async function renewRows(): Promise<void> {
  const server = await TestRedisServer.start();
  const sentinel = await SentinelSetup.start({ replicas: 2 });
  const cluster = await ClusterSetup.start({ masters: 3, replicasPerMaster: 1 });
  const stores: Store[] = [];
  const open = async (spec: string) => {
    const store = await openStore(spec);
    stores.push(store);
    return store;
  };
  try {
    const admin = server.client();
    const sha = (await admin.script("LOAD", "return 1")) as string;
    admin.disconnect();
    // Each store with the floor its renew is read against: on one server the bare
    // EVALSHA, on a replicated one the same with its WAIT beside it ("WAIT aside").
    const targets: Array<[string, Store, string | null]> = [
      ["one redis-server", await open(server.url), null],
      ["Sentinel (WAIT 1 of 2 replicas)", await open(sentinel.storeSpec()), sentinel.storeSpec()],
      ["Cluster (3 masters, WAIT 1)", await open(cluster.storeSpec()), cluster.storeSpec()],
    ];
    for (const [, store] of targets) await renewLoop(() => store, 2000, 8, "warm"); // JIT, script caches
    const rows: Array<Array<string | number>> = [];
    for (const concurrency of CONCURRENCY) {
      const bare = bareEvalsha(server.port, sha, concurrency, RENEWS * 2);
      rows.push([
        `bare EVALSHA, one redis-server (c=${concurrency})`,
        bare.opsPerSec,
        bare.p50Ms,
        bare.p99Ms,
        "1.00 (baseline)",
        "",
        "",
      ]);
      let oneServer = 0;
      for (const [name, store, replicated] of targets) {
        let floor = bare;
        if (replicated !== null) {
          floor = await scriptAndWait(replicated, RENEWS, concurrency);
          const where = replicated === sentinel.storeSpec() ? "Sentinel master" : "each key's Cluster master";
          rows.push([
            `bare EVALSHA + WAIT 1 beside it, ${where} (c=${concurrency})`,
            floor.opsPerSec,
            floor.p50Ms,
            floor.p99Ms,
            (floor.opsPerSec / bare.opsPerSec).toFixed(2),
            "",
            "",
          ]);
        }
        const measured = await renewLoop(() => store, RENEWS, concurrency, `c${concurrency}`);
        const overFloor = measured.opsPerSec / floor.opsPerSec;
        if (replicated === null) oneServer = overFloor;
        rows.push([
          `Store.renew, ${name} (c=${concurrency})`,
          measured.opsPerSec,
          measured.p50Ms,
          measured.p99Ms,
          (measured.opsPerSec / bare.opsPerSec).toFixed(2),
          overFloor.toFixed(2),
          replicated === null ? "1.00" : (overFloor / oneServer).toFixed(2),
        ]);
      }
    }
    printTable(
      `Lease renew on replicated Redis: ${RENEWS.toLocaleString("en-US")} renews per row, loopback (ratio = ops/s over the bare EVALSHA at the same concurrency; over floor = the Store's ops/s over its store's floor row, on one server the bare EVALSHA; WAIT aside = that over one server's, #34's "within 0.8x")`,
      ["what", "ops/s", "p50 ms", "p99 ms", "ratio", "over floor", "WAIT aside"],
      rows,
    );
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all([server.stop(), sentinel.stop(), cluster.stop()]);
  }
}

/** One failover round's times, ms from the fault. */
interface Round {
  /** the store whole again: a new master named by a sentinel, or the cluster ok everywhere */
  recoveredMs: number;
  /**
   * the first keeper active after that (after SENTINEL FAILOVER the old master may grant
   * for a moment: a lease the new master does not know, so it does not count)
   */
  holderMs: number;
}

/**
 * Three keepers on one shard, on two Store connections (two bridges' worth), through a
 * fault: `fault` strikes and resolves with when (performance.now) the store was whole
 * again. From the fault: the recovery, and the first keeper active again after it.
 */
async function failoverRound(spec: string, fault: () => Promise<number>): Promise<Round> {
  const stores = [await openStore(spec), await openStore(spec)];
  const activeAt: number[] = [];
  /** what the keepers said, for the error when a round fails */
  const said: string[] = [];
  const keepers = ["a", "b", "c"].map((agent, i) => {
    const keeper = new LeaseKeeper({ client: stores[i % 2]!, shard: SHARD, agent, ttlMs: TTL_MS });
    keeper.on("active", () => activeAt.push(performance.now()));
    for (const event of ["active", "standby", "lost", "store-error"] as const)
      keeper.on(event, (e: object) =>
        said.push(`${Math.round(performance.now())} ${agent} ${event} ${JSON.stringify(e).slice(0, 120)}`),
      );
    return keeper.start();
  });
  const fail = (what: string) => new Error(`${what}; last said: ${said.slice(-12).join(" | ")}`);
  try {
    for (const deadline = performance.now() + 20_000; activeAt.length === 0;) {
      if (performance.now() > deadline) throw fail("no keeper became active");
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, TTL_MS)); // steady renewing
    const faultAt = performance.now();
    const recoveredAt = await fault();
    for (const deadline = performance.now() + 6 * TTL_MS + 20_000; !activeAt.some((t) => t > recoveredAt);) {
      if (performance.now() > deadline)
        throw fail(`no keeper active again after the fault (at ${Math.round(faultAt)})`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return { recoveredMs: recoveredAt - faultAt, holderMs: activeAt.find((t) => t > recoveredAt)! - faultAt };
  } finally {
    await Promise.all(keepers.map((k) => k.stop()));
    await Promise.all(stores.map((s) => s.close()));
  }
}

/** A fault of a fresh Sentinel setup each round (a master just failed over cannot be again for a while). */
async function sentinelRounds(fault: (setup: SentinelSetup) => Promise<number>): Promise<Round[]> {
  const rounds: Round[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const setup = await SentinelSetup.start({ replicas: 2, failoverTimeoutMs: 3000 });
    try {
      rounds.push(await failoverRound(setup.storeSpec(), () => fault(setup)));
    } finally {
      await setup.stop();
    }
  }
  return rounds;
}

/** CLUSTER FAILOVER of the shard's master, on one cluster for every round: the slot goes back and forth. */
async function clusterRounds(): Promise<Round[]> {
  const cluster = await ClusterSetup.start({ masters: 3, replicasPerMaster: 1 });
  try {
    const rounds: Round[] = [];
    for (let i = 0; i < ROUNDS; i++)
      rounds.push(
        await failoverRound(cluster.storeSpec(), async () => {
          const owner = await cluster.ownerOf(`sb:{shard:${SHARD}}:lease`);
          await cluster.failover(owner.replicaPorts[0]!);
          return performance.now();
        }),
      );
    return rounds;
  } finally {
    await cluster.stop();
  }
}

/** When (performance.now) the first sentinel named a new master that said it was one. */
async function promotedAfter(setup: SentinelSetup, oldMaster: number): Promise<number> {
  const started = performance.now();
  return started + (await setup.waitForNewMaster(oldMaster, 30_000)).elapsedMs;
}

/** The master frozen this long, past its promotion (#45's runs): then it thaws and is demoted. */
const FROZEN_FOR_MS = 5000;

/** The faults whose rows BENCH_HA_FAULTS names (a part of each name, comma-separated), or every one. */
const FAULTS = process.env.BENCH_HA_FAULTS?.split(",").map((part) => part.trim().toLowerCase());

async function failoverRows(): Promise<void> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
  const faults: Array<[name: string, rounds: () => Promise<Round[]>]> = [
    [
      "Sentinel: master kill -9",
      () =>
        sentinelRounds(async (setup) => {
          const master = (await setup.currentMaster()).port;
          await setup.kill(master);
          return promotedAfter(setup, master);
        }),
    ],
    [
      "Sentinel: master frozen (SIGSTOP) until promoted",
      () =>
        sentinelRounds(async (setup) => {
          const master = (await setup.currentMaster()).port;
          setup.freeze(master);
          const promoted = await promotedAfter(setup, master);
          setup.thaw(master);
          return promoted;
        }),
    ],
    [
      `Sentinel: master frozen (SIGSTOP) ${FROZEN_FOR_MS / 1000} s, past its promotion`,
      () =>
        sentinelRounds(async (setup) => {
          const master = (await setup.currentMaster()).port;
          const frozenAt = performance.now();
          setup.freeze(master);
          const promoted = await promotedAfter(setup, master);
          await sleep(frozenAt + FROZEN_FOR_MS - performance.now());
          setup.thaw(master);
          return promoted;
        }),
    ],
    [
      "Sentinel: SENTINEL FAILOVER",
      () => sentinelRounds(async (setup) => promotedAfter(setup, (await setup.sentinelFailover()).oldPort)),
    ],
    ["Cluster: CLUSTER FAILOVER of the shard's master", clusterRounds],
  ];
  const results: Array<[string, Round[]]> = [];
  for (const [name, rounds] of faults)
    if (FAULTS === undefined || FAULTS.some((part) => name.toLowerCase().includes(part)))
      results.push([name, await rounds()]);

  const median = (values: number[]) =>
    percentile(
      [...values].sort((a, b) => a - b),
      50,
    );
  const worst = (values: number[]) => Math.max(...values);
  printTable(
    `Failover under Redis faults: ${ROUNDS} rounds each, TTL ${TTL_MS} ms, three keepers on two store connections; ` +
      `ms from the fault (recovered: a new master named / cluster ok; goal, #32's: a holder within recovery + TTL + 0.5 s)`,
    [
      "fault",
      "recovered median",
      "worst",
      "holder median",
      "worst",
      "holder - recovered median",
      "worst",
      "goal met",
    ],
    results.map(([name, rounds]) => {
      const gap = rounds.map((r) => r.holderMs - r.recoveredMs);
      return [
        name,
        median(rounds.map((r) => r.recoveredMs)),
        worst(rounds.map((r) => r.recoveredMs)),
        median(rounds.map((r) => r.holderMs)),
        worst(rounds.map((r) => r.holderMs)),
        median(gap),
        worst(gap),
        `${gap.filter((g) => g <= TTL_MS + HOLDER_GOAL_OVER_TTL_MS).length}/${rounds.length}`,
      ];
    }),
  );
}

export async function haBench(): Promise<void> {
  await renewRows();
  // BENCH_HA_ROUNDS=0: the renew rows alone (the failover rounds take minutes).
  if (ROUNDS > 0) await failoverRows();
}
