import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { processCpuS } from "./load.js";
import { RENEW_EVERY_MS, RenewLog, TTL_MS, within, type Peer, type Stoppable } from "./peers/common.js";
import { SHARDBRIDGE } from "../helpers/cli.js";
import { startEtcd } from "./peers/etcd.js";
import { etcdVersion } from "./peers/etcd-server.js";
import { POLL_MS, startRedisLock } from "./peers/redis-lock.js";
import { startShardbridge } from "./peers/shardbridge.js";
import { percentile, printTable } from "./stats.js";

/**
 * `make bench peers` (#48): the same fleet of leases against three peers, each started by
 * the bench on loopback free ports in the same run — shardbridge over HTTP (peers/shardbridge.ts),
 * one etcd member through the etcd3 client (peers/etcd.ts), and a Redis lock as
 * redlock-style libraries keep it (peers/redis-lock.ts). Every shard has one holder and
 * one standby, a TTL of 6 s and a renew every TTL/3; the whole fleet runs in this process
 * (shardbridge's agents on keep-alive pools: peers/shardbridge.ts says why).
 *
 * For each peer and fleet size: the server's CPU (its processes' utime + stime from /proc)
 * over a window of the fleet renewing at its own rate, divided by the renews the holders
 * finished in it — whatever the standbys cost the server (waits, watches and their
 * leases' keep-alives, polls) is in the CPU and not among the renews; each renew's
 * latency in that window. Then, once per peer: renews per second with CALLERS closed-loop
 * callers on leases of their own (the fleet stopped); failover after kill -9 of a holder in
 * a child process and after a graceful release, each the time from the signal to the
 * standby holding as the standby sees it, while the first fleet runs. Nothing is asserted.
 *
 * BENCH_PEERS_SHARDS: the fleet sizes (1000,10000). A size whose fleet does not stand is
 * said and left n/a.
 * BENCH_PEERS_ROUNDS: failover rounds of each kind (20), each on a shard of its own, its
 * signal at a random point of its holder's renew cycle; the kill -9 rounds BENCH_PEERS_PARALLEL
 * at a time (5: one at a time, about two minutes a peer, where the TTL is most of each
 * figure), the releases one at a time. BENCH_PEERS_WINDOW_S (20),
 * BENCH_PEERS: the peers to run (shardbridge,etcd,redis-lock). BENCH_PEERS_RENEW_SOCKETS:
 * shardbridge's fleet's renew sockets at most (peers/shardbridge.ts).
 */
const SHARDS = (process.env.BENCH_PEERS_SHARDS ?? "1000,10000")
  .split(",")
  .map(Number)
  .sort((a, b) => a - b);
const WINDOW_S = Number(process.env.BENCH_PEERS_WINDOW_S ?? 20);
/** after the fleet stands: renews settle to their own rate */
const WARMUP_S = 4;
const SATURATION_S = 5;
const CALLERS = 32;
const ROUNDS = Number(process.env.BENCH_PEERS_ROUNDS ?? 20);
const PARALLEL = Number(process.env.BENCH_PEERS_PARALLEL ?? 5);
const PEERS = process.env.BENCH_PEERS?.split(",") ?? ["shardbridge", "etcd", "redis-lock"];

const fleetShards = (size: number) =>
  Array.from({ length: size }, (_, i) => `f${size}-${String(i).padStart(5, "0")}`);
const roundShard = (kind: Kind, round: number) => `${kind}-${String(round).padStart(2, "0")}`;
type Kind = "kill" | "term";

interface FleetFigures {
  cpuUsPerRenew: number;
  p50Ms: number;
  p99Ms: number;
}

interface Figures {
  fleets: Map<number, FleetFigures>;
  saturationPerS: number;
  failoverMs: Record<Kind, number[]>;
}

let note: (what: string) => void = () => undefined;

/** Every shard any peer serves in this run: shardbridge defines them all at its start. */
function allShards(): string[] {
  const rounds = (kind: Kind) => Array.from({ length: ROUNDS }, (_, r) => roundShard(kind, r));
  const saturation = Array.from({ length: CALLERS }, (_, c) => `sat-${c}`);
  return [...SHARDS.flatMap(fleetShards), ...rounds("kill"), ...rounds("term"), ...saturation];
}

async function startPeer(name: string): Promise<Peer> {
  if (name === "shardbridge") return startShardbridge(allShards());
  if (name === "etcd") return startEtcd();
  if (name === "redis-lock") return startRedisLock();
  throw new Error(`BENCH_PEERS: no peer ${name} (shardbridge, etcd, redis-lock)`);
}

const cpuS = (pids: number[]) => pids.reduce((sum, pid) => sum + processCpuS(pid), 0);

/** A delay the histogram holds (ns, each turn of its 10 ms timer), less the timer's own 10 ms. */
const loopMs = (ns: number) => Math.max(0, ns / 1e6 - 10).toFixed(1);

/** The fleet renewing at its own rate for WINDOW_S: the servers' CPU per renew, the renews' latency. */
async function cpuWindow(peer: Peer, renews: RenewLog): Promise<FleetFigures> {
  const pids = peer.serverPids();
  const server0 = cpuS(pids);
  const load0 = process.cpuUsage();
  // This process's own delays are in every latency it measures: said beside them.
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const started = performance.now();
  renews.recording = true;
  await sleep(WINDOW_S * 1000);
  renews.recording = false;
  loop.disable();
  const seconds = (performance.now() - started) / 1000;
  const serverS = cpuS(pids) - server0;
  const load = process.cpuUsage(load0);
  const count = renews.latenciesMs.length;
  const sorted = Array.from(Float64Array.from(renews.latenciesMs).sort());
  note(
    `${peer.name}: ${(count / seconds).toFixed(0)} renews/s; server CPU ${((serverS / seconds) * 100).toFixed(0)}% ` +
      `of a core, this process ${(((load.user + load.system) / 1e6 / seconds) * 100).toFixed(0)}%; ` +
      `its event loop's delay p99 / max ${loopMs(loop.percentile(99))} / ${loopMs(loop.max)} ms; ` +
      `leases lost since the fleet's start: ${renews.losses}`,
  );
  return {
    cpuUsPerRenew: (serverS * 1e6) / count,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
  };
}

/** The peer at saturation; its server's CPU meanwhile said, to tell whose limit it is. */
async function saturation(peer: Peer): Promise<number> {
  const pids = peer.serverPids();
  const server0 = cpuS(pids);
  const started = performance.now();
  const perS = await peer.saturate(CALLERS, SATURATION_S);
  const seconds = (performance.now() - started) / 1000;
  note(
    `${peer.name}: saturation: server CPU ${(((cpuS(pids) - server0) / seconds) * 100).toFixed(0)}% of a core`,
  );
  return perS;
}

/** One round: the holder signalled at a random point of its renew cycle; ms to the standby holding. */
async function failoverRound(peer: Peer, shard: string, kind: Kind): Promise<number> {
  const pair = await peer.failoverPair(shard);
  try {
    await sleep(Math.random() * RENEW_EVERY_MS);
    const signalledAt = performance.now();
    pair.holder.signal(kind === "kill" ? "SIGKILL" : "SIGTERM");
    const heldAt = await within(pair.standbyHolds, 3 * TTL_MS, `${shard}: the standby holding`);
    return heldAt - signalledAt;
  } finally {
    await pair.stop();
  }
}

/** ROUNDS rounds; a round that failed is said and left out. */
async function failovers(peer: Peer, kind: Kind): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  const runner = async () => {
    for (let round = next++; round < ROUNDS; round = next++) {
      try {
        times.push(await failoverRound(peer, roundShard(kind, round), kind));
      } catch (error) {
        note(`${peer.name}: ${kind} round ${round} failed: ${String(error)}`);
      }
    }
  };
  // Releases one at a time: a holder's start-up beside another round's release would be in its figure.
  const parallel = kind === "kill" ? PARALLEL : 1;
  await Promise.all(Array.from({ length: Math.min(parallel, ROUNDS) }, runner));
  return times.sort((a, b) => a - b);
}

async function measure(peer: Peer): Promise<Figures> {
  const figures: Figures = {
    fleets: new Map(),
    saturationPerS: NaN,
    failoverMs: { kill: [], term: [] },
  };
  for (const size of SHARDS) {
    note(`${peer.name}: ${size.toLocaleString("en-US")} shards: holders, then standbys`);
    const renews = new RenewLog();
    let fleet: Stoppable;
    try {
      fleet = await peer.startFleet(fleetShards(size), renews);
    } catch (error) {
      note(
        `${peer.name}: the fleet of ${size.toLocaleString("en-US")} did not stand, its figures left out: ${String(error)}`,
      );
      await sleep(TTL_MS); // its leases gone before the next measure
      continue;
    }
    try {
      await sleep(WARMUP_S * 1000);
      note(`${peer.name}: ${size.toLocaleString("en-US")} shards: ${WINDOW_S} s window`);
      figures.fleets.set(size, await cpuWindow(peer, renews));
      // Beside the smallest fleet that stood: the failovers' own processes are not in its window.
      if (figures.failoverMs.kill.length === 0 && figures.failoverMs.term.length === 0) {
        for (const kind of ["kill", "term"] as const) {
          note(`${peer.name}: failover after ${kind === "kill" ? "kill -9" : "release"}, ${ROUNDS} rounds`);
          figures.failoverMs[kind] = await failovers(peer, kind);
        }
      }
    } finally {
      await fleet.stop();
    }
    // what the fleet's end set off (releases, waits answered) is over before the next measure
    await sleep(2000);
  }
  note(`${peer.name}: saturation, ${CALLERS} callers`);
  figures.saturationPerS = await saturation(peer);
  return figures;
}

function report(figures: Array<Figures | undefined>, totalS: number): void {
  const shards = (n: number) => `${n.toLocaleString("en-US")} shards`;
  type Better = "lower" | "higher";
  const row = (what: string, better: Better, figure: (f: Figures) => number) => {
    const values = figures.map((f) => (f === undefined ? NaN : figure(f)));
    return [`${what} (${better} is better)`, ...values, ratio(values, better)];
  };
  const fleet = (size: number, pick: (f: FleetFigures) => number) => (f: Figures) => {
    const got = f.fleets.get(size);
    return got === undefined ? NaN : pick(got);
  };
  const median = (kind: Kind) => (f: Figures) => percentile(f.failoverMs[kind], 50);
  const worst = (kind: Kind) => (f: Figures) => f.failoverMs[kind].at(-1) ?? NaN;
  const rounds = (kind: Kind) =>
    figures.some((f) => f !== undefined && f.failoverMs[kind].length < ROUNDS)
      ? " (rounds short: see log)"
      : "";
  printTable(
    `Leases against peers (#48): one holder and one standby a shard, TTL ${TTL_MS / 1000} s, a renew every TTL/3. ` +
      `shardbridge: ${bridgeRuns()} on one redis-server, agents through BridgeClient + LeaseKeeper, standbys waiting ` +
      `(wait_ms). etcd ${etcdVersion()} (one member): a lease per agent kept alive by the etcd3 client, the key put by a ` +
      `create-if-absent txn, standbys watching it. Redis lock: SET NX PX, the compare-and-extend script, standbys ` +
      `polling SET NX every ${POLL_MS} ms.\n  CPU per renew: the server's processes (the bridge + its redis-server; ` +
      `etcd; redis-server) over ${WINDOW_S} s of the fleet at its own rate, per renew the holders finished; the ` +
      `standbys' own cost is in the CPU. Saturation: ${CALLERS} callers, ${SATURATION_S} s, closed loop (shardbridge: wrk; ` +
      `etcd: the etcd3 client, one keep-alive stream a caller; redis lock: redis-benchmark). Failover: ` +
      `the signal to the standby holding, ${ROUNDS} rounds each, while the ${shards(SHARDS[0]!)} run. ` +
      `Every peer and its clients share this machine's cores. ${totalS.toFixed(0)} s in all.`,
    ["what", "shardbridge", "etcd", "redis lock", "shardbridge / best peer"],
    [
      ...SHARDS.map((size) =>
        row(
          `server CPU per renew, µs, ${shards(size)}`,
          "lower",
          fleet(size, (f) => f.cpuUsPerRenew),
        ),
      ),
      row(`renews/s at saturation, ${CALLERS} callers`, "higher", (f) => f.saturationPerS),
      ...SHARDS.flatMap((size) => [
        row(
          `renew p50 at the fleet's rate, ms, ${shards(size)}`,
          "lower",
          fleet(size, (f) => f.p50Ms),
        ),
        row(
          `renew p99 at the fleet's rate, ms, ${shards(size)}`,
          "lower",
          fleet(size, (f) => f.p99Ms),
        ),
      ]),
      row(`failover after kill -9, median, ms${rounds("kill")}`, "lower", median("kill")),
      row(`failover after kill -9, worst, ms`, "lower", worst("kill")),
      row(`failover after release, median, ms${rounds("term")}`, "lower", median("term")),
      row(`failover after release, worst, ms`, "lower", worst("term")),
    ],
  );
}

/** What runs as the bridge: dist/ when it is built from the sources as they are (make bench builds it). */
const bridgeRuns = () =>
  SHARDBRIDGE.args.some((a) => a.endsWith("dist/cli.js"))
    ? "the compiled bridge (dist/cli.js)"
    : "the bridge from src/ through tsx (dist/ is older than the sources)";

/** shardbridge's figure over the best of the others; above 1 is shardbridge's better only where higher is better. */
function ratio([own, ...others]: number[], better: "lower" | "higher"): string {
  const peers = others.filter(Number.isFinite);
  if (own === undefined || !Number.isFinite(own) || peers.length === 0) return "n/a";
  const best = better === "lower" ? Math.min(...peers) : Math.max(...peers);
  return best === 0 ? "n/a" : (own / best).toFixed(2);
}

export async function peersBench(): Promise<void> {
  const t0 = performance.now();
  note = (what) =>
    process.stderr.write(`[peers bench ${((performance.now() - t0) / 1000).toFixed(0)} s] ${what}\n`);
  const figures: Array<Figures | undefined> = [];
  for (const name of ["shardbridge", "etcd", "redis-lock"]) {
    if (!PEERS.includes(name)) {
      figures.push(undefined);
      continue;
    }
    note(`${name}: starting`);
    const peer = await startPeer(name);
    try {
      figures.push(await measure(peer));
    } finally {
      await peer.stop();
    }
  }
  report(figures, (performance.now() - t0) / 1000);
}
