import { BridgeClient } from "../../src/agent/bridge-client.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { startEchoServer, type EchoServer } from "./echo-server.js";
import {
  machineBusyCpuS,
  probeBeside,
  processCpuS,
  requireWrk,
  runWrk,
  type WrkOptions,
  type WrkRequest,
  type WrkResult,
} from "./load.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { readLoop } from "./bridge-metrics.js";
import { printTable } from "./stats.js";
import { nodeUuid } from "./uuids.js";

/**
 * The bridge over HTTP, driven by wrk (C; it costs a fraction of a core for what one Node
 * process serves) instead of a Node client sharing the bridge's two cores. Every row
 * beside a floor measured in the same run: a bare node:http JSON echo in its own process,
 * driven the same way; beside the Redis renew also that echo waiting for one renew-like
 * script a request (the floor of any Node service that renews in Redis per request: how
 * much of the gap to the plain floor is Redis on these two cores); beside the node list
 * also that echo answering a document of the list's size kept ready (the floor of any
 * Node service sending those bytes: what the machine makes of them shows in its p99).
 * The bridge runs as it does in production (`shardbridge serve` in its own process) on a
 * private redis-server, and on the embedded memory store where that is cheap. Nothing is
 * asserted: the goals are printed beside the numbers.
 *
 * Each wrk run is BENCH_WRK_SECONDS (5) long after a 1 s warm-up; the leases need one TTL
 * (60 s) after the store's start before they are granted, which the runs that need no
 * lease (floor, /healthz, /v1/shards) and the bulk loads use up. What a shared host gives
 * drifts by tens of percent within one run, so every row compared with the floor has the
 * floor measured again just before it, and every run reports the CPU the rest of the
 * machine used meanwhile: a run that shared the two cores with something else shows it.
 */
const SECONDS = Number(process.env.BENCH_WRK_SECONDS ?? 5);
/** the floor again just before each row that is compared with it */
const NEAR_FLOOR_SECONDS = 3;
/** wrk threads: one epoll loop keeps up with one Node process (about 1/3 of a core at the floor's rate) */
const THREADS = Number(process.env.BENCH_WRK_THREADS ?? 1);
const RENEW_AGENTS = 8;
const LIST_CONNECTIONS = 4;
const HEAVY_CONNECTIONS = 4;
/** the light probe: 2 connections, each pausing after every answer */
const PROBE_CONNECTIONS = 2;
const PROBE_PAUSE_MS = 5;
const TTL_MS = 60_000;

const NODES = 100_000;
const SHARDED_EVERY = 50; // 2,000 sharded nodes, in two shards of 1,000, spread through the uuid order
const FLEET_SHARDS = ["fleet-a", "fleet-b"];
const INSTANCE_NODES = 1000; // unsharded nodes whose instance is on a legacy-pool agent
const BULK = 20_000; // the API's most per request

const RENEWERS = Array.from({ length: RENEW_AGENTS }, (_, i) => `agent-${i}`);
const FLEET_AGENT = "fleet-0";
const LEGACY_AGENTS = ["legacy-0", "legacy-1", "legacy-2", "legacy-3"];

/** The mixed fleet: 98,000 unsharded (1,000 of them with an instance on a legacy agent), 2 × 1,000 sharded. */
function fleet(): Array<{
  uuid: string;
  name: string;
  shard: string | null;
  conductor_group: string;
  instance_host: string | null;
}> {
  let unsharded = 0;
  return Array.from({ length: NODES }, (_, i) => {
    const sharded = i % SHARDED_EVERY === 0;
    const shard = sharded ? FLEET_SHARDS[(i / SHARDED_EVERY) % FLEET_SHARDS.length]! : null;
    // every 98th unsharded node has an instance: 1,000 of 98,000
    const withInstance = !sharded && unsharded++ % ((NODES - NODES / SHARDED_EVERY) / INSTANCE_NODES) === 0;
    return {
      uuid: nodeUuid(i + 1),
      name: `node-${i}`,
      shard,
      conductor_group: "",
      instance_host: withInstance ? LEGACY_AGENTS[i % LEGACY_AGENTS.length]! : null,
    };
  });
}

async function usedMemory(redis: TestRedisServer): Promise<number> {
  const admin = redis.client();
  try {
    const info = await admin.info("memory");
    return Number(/used_memory:(\d+)/.exec(info)?.[1]);
  } finally {
    admin.disconnect();
  }
}

/**
 * What each kind of key costs per node (MEMORY USAGE, every key, summed by the part of its
 * name that says what it holds: d: records, a: all-nodes index, u: unsharded pool, s: a
 * shard's index, h: instance hosts, ...), and each kind's encodings: a listpack is the
 * compact one, a skiplist costs about three times as much per entry.
 */
async function memoryByKind(redis: TestRedisServer, nodes: number): Promise<Array<[string, number]>> {
  const admin = redis.client();
  const kinds = new Map<string, { keys: number; bytes: number; encodings: Set<string> }>();
  try {
    let cursor = "0";
    do {
      const [next, keys] = await admin.scan(cursor, "COUNT", 1000);
      cursor = next;
      for (const key of keys) {
        const kind = /\{nodes\}:([a-z~]+)/.exec(key)?.[1] ?? key.replace(/^[^:]*:/, "").split(":")[0]!;
        const entry = kinds.get(kind) ?? { keys: 0, bytes: 0, encodings: new Set<string>() };
        entry.keys += 1;
        entry.bytes += Number(await admin.memory("USAGE", key, "SAMPLES", "0"));
        entry.encodings.add(String(await admin.object("ENCODING", key)));
        kinds.set(kind, entry);
      }
    } while (cursor !== "0");
  } finally {
    admin.disconnect();
  }
  return [...kinds]
    .sort(([, a], [, b]) => b.bytes - a.bytes)
    .map(([kind, { keys, bytes, encodings }]) => [
      `  keys "${kind}" (${keys.toLocaleString("en-US")}: ${[...encodings].join(", ")}), bytes per node`,
      bytes / nodes,
    ]);
}

const json = (token: string) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" });

/** One bridge with everything the rows need: the fleet loaded, heartbeats, leases held. */
class Rig {
  readonly admin: BridgeClient;
  readonly client: Map<string, BridgeClient>;
  readonly tokens = new Map<string, number>(); // shard -> fencing token
  private keeper: NodeJS.Timeout | undefined;

  constructor(
    readonly label: string,
    readonly bridge: BridgeProcess,
  ) {
    this.admin = new BridgeClient(bridge.url, this.adminToken, 120_000);
    this.client = new Map(
      [...RENEWERS, FLEET_AGENT, ...LEGACY_AGENTS].map((a) => [
        a,
        new BridgeClient(bridge.url, bridge.tokenOf(a), 10_000),
      ]),
    );
  }

  get adminToken(): string {
    return this.bridge.tokenFor("admin");
  }

  get pid(): number | undefined {
    return this.bridge.serve.child.pid;
  }

  async load(): Promise<number> {
    const nodes = fleet();
    const started = performance.now();
    for (let from = 0; from < nodes.length; from += BULK)
      await this.admin.bulkUpsert(nodes.slice(from, from + BULK));
    return (performance.now() - started) / 1000;
  }

  async heartbeats(): Promise<void> {
    await this.client.get(FLEET_AGENT)!.heartbeat(FLEET_AGENT, [FLEET_SHARDS[0]!]);
    for (const agent of LEGACY_AGENTS) await this.client.get(agent)!.heartbeat(agent, []);
  }

  /** Take the leases (waiting out the store's first TTL), then keep them and the heartbeats going. */
  async acquire(renewers: string[]): Promise<void> {
    const held: Array<[string, string]> = [
      [FLEET_SHARDS[0]!, FLEET_AGENT],
      ...renewers.map((a, i) => [`http-${i}`, a] as [string, string]),
    ];
    for (const [shard, agent] of held)
      this.tokens.set(shard, await acquireWhenReady(this.client.get(agent)!, shard, agent));
    // A heartbeat every 10 s and a renew every 20 s of a 60 s lease (TTL/3): what real agents send, a
    // handful of requests beside thousands per second.
    let tick = 0;
    this.keeper = setInterval(() => {
      void (async () => {
        await this.heartbeats();
        if (tick++ % 2 !== 0) return;
        for (const [shard, agent] of held) {
          const out = await this.client.get(agent)!.renew({ shard, agent, token: this.tokens.get(shard)! });
          if (!out.ok)
            process.stderr.write(`[http bench] ${this.label}: renew of ${shard} refused: ${out.reason}\n`);
        }
      })().catch((error: unknown) =>
        process.stderr.write(`[http bench] ${this.label}: keeper: ${String(error)}\n`),
      );
    }, 10_000);
  }

  stopKeeper(): void {
    clearInterval(this.keeper);
  }

  renewRequest(i: number): WrkRequest {
    const agent = RENEWERS[i]!;
    const shard = `http-${i}`;
    return {
      method: "POST",
      path: `/v1/shards/${shard}/lease`,
      headers: json(this.bridge.tokenOf(agent)),
      body: JSON.stringify({ agent, token: this.tokens.get(shard)! }),
    };
  }

  nodeListRequest(): WrkRequest {
    return {
      method: "GET",
      path: `/v1/agents/${FLEET_AGENT}/nodes?token=${this.tokens.get(FLEET_SHARDS[0]!)!}`,
      headers: { authorization: `Bearer ${this.bridge.tokenOf(FLEET_AGENT)}` },
    };
  }

  shardsRequest(): WrkRequest {
    return { method: "GET", path: "/v1/shards", headers: { authorization: `Bearer ${this.adminToken}` } };
  }

  /** The node list's answer as it goes out, in bytes. */
  async nodeListBytes(): Promise<number> {
    const { path, headers } = this.nodeListRequest();
    const res = await fetch(`${this.bridge.url}${path}`, { headers });
    const bytes = (await res.arrayBuffer()).byteLength;
    if (!res.ok) throw new Error(`${this.label}: node list: ${res.status}`);
    return bytes;
  }

  /** The node list answers the shard's 1,000 nodes under the lease (and nothing else for this agent). */
  async checkNodeList(): Promise<void> {
    const list = await this.client
      .get(FLEET_AGENT)!
      .nodesOf(FLEET_AGENT, [this.tokens.get(FLEET_SHARDS[0]!)!]);
    const viaLease = list.nodes.filter((n) => n.via === "lease").length;
    if (viaLease !== NODES / SHARDED_EVERY / FLEET_SHARDS.length || list.legacy.pool_member) {
      throw new Error(
        `${this.label}: node list has ${viaLease} lease nodes of ${list.nodes.length} (pool member: ${list.legacy.pool_member})`,
      );
    }
  }
}

interface Run {
  result: WrkResult;
  /** the heavy load beside it, if any */
  beside?: WrkResult;
  wallS: number;
  /** CPU seconds of the server(s) under test and of redis-server during the run */
  serverCpuS: number;
  redisCpuS: number;
  /** CPU seconds the whole machine was busy (all cores) */
  machineCpuS: number;
  /** the echo floor measured just before this run, which its ratio is over */
  floor?: Run;
}

const pct = (cpuS: number, wallS: number) =>
  Number.isFinite(cpuS) ? `${Math.round((cpuS / wallS) * 100)}%` : "n/a";

export async function httpBench(): Promise<void> {
  requireWrk();
  const t0 = performance.now();
  const elapsed = () => ((performance.now() - t0) / 1000).toFixed(0);
  const note = (what: string) => process.stderr.write(`[http bench ${elapsed()} s] ${what}\n`);

  const shards = [
    ...RENEWERS.map((_, i) => ({ name: `http-${i}`, lease_ttl_ms: TTL_MS })),
    ...FLEET_SHARDS.map((name) => ({ name, lease_ttl_ms: TTL_MS })),
  ];
  const agents = [...RENEWERS, FLEET_AGENT, ...LEGACY_AGENTS];
  const env = { SHARDBRIDGE_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn" };

  const echo = await startEchoServer();
  const redis = await TestRedisServer.start();
  // The floor with Redis in it: the same echo, waiting for one renew-like script a request.
  const echoRedis = await startEchoServer({ redisUrl: redis.url });
  // The node list's floor, started once the list's size is known.
  let keptEcho: EchoServer | undefined;
  const bridges: BridgeProcess[] = [];
  try {
    // Both stores start now, so their first TTL (no lease before it) runs down together.
    bridges.push(await startBridge({ shards, agents, store: redis.url, env }));
    bridges.push(await startBridge({ shards, agents, store: "memory", env }));
    const onRedis = new Rig("redis", bridges[0]!);
    const onMemory = new Rig("memory", bridges[1]!);

    const measure = async (
      pids: Array<number | undefined>,
      go: () => Promise<{ result: WrkResult; beside?: WrkResult }>,
    ): Promise<Run> => {
      const before = pids.map(processCpuS);
      const redisBefore = processCpuS(redis.pid);
      const machineBefore = machineBusyCpuS();
      const started = performance.now();
      const out = await go();
      const wallS = (performance.now() - started) / 1000;
      const serverCpuS = pids.map(processCpuS).reduce((sum, cpu, i) => sum + cpu - before[i]!, 0);
      return {
        ...out,
        wallS,
        serverCpuS,
        redisCpuS: processCpuS(redis.pid) - redisBefore,
        machineCpuS: machineBusyCpuS() - machineBefore,
      };
    };
    // Before each measured run, let our servers finish what an earlier run left in flight (wrk
    // drops its connections at the end; a bridge still computes the answers): at most 10 s.
    const ours = [echo.pid, echoRedis.pid, onRedis.pid, onMemory.pid, redis.pid];
    const oursCpuS = () => ours.reduce((sum: number, pid) => sum + processCpuS(pid), 0);
    const settle = async () => {
      const deadline = performance.now() + 10_000;
      for (;;) {
        const before = oursCpuS();
        await new Promise((r) => setTimeout(r, 200));
        if (!((oursCpuS() - before) / 0.2 > 0.1) || performance.now() > deadline) return;
      }
    };

    // The floor: the echo server answering the same shape as a renew (a POST with a bearer
    // token and a small JSON body), 8 connections.
    const renewBody = JSON.stringify({ agent: "agent-0", token: 1_795_998_731_000_123 });
    const floorOptions: WrkOptions = {
      url: echo.url,
      connections: RENEW_AGENTS,
      threads: THREADS,
      durationS: SECONDS,
      requests: RENEWERS.map((_, i) => ({
        method: "POST",
        path: `/v1/shards/http-${i}/lease`,
        headers: json(onRedis.bridge.tokenOf(RENEWERS[i]!)),
        body: renewBody,
      })),
    };
    const floorRun = async (durationS: number) => {
      await settle();
      return measure([echo.pid], async () => ({ result: await runWrk({ ...floorOptions, durationS }) }));
    };
    /**
     * A row against the floor: the floor again (shorter) just before it, since what the
     * machine gives (a shared host) drifts within a run, then a warm-up and the run itself.
     */
    const wrk = async (
      pid: number | undefined,
      options: Omit<WrkOptions, "threads" | "durationS">,
    ): Promise<Run> => {
      const floor = await floorRun(NEAR_FLOOR_SECONDS);
      await runWrk({ ...options, threads: THREADS, durationS: 1 }); // warm-up: JIT, connections, caches
      await settle();
      const run = await measure([pid], async () => ({
        result: await runWrk({ ...options, threads: THREADS, durationS: SECONDS }),
      }));
      return { ...run, floor };
    };

    // The fleet, loaded over HTTP; Redis memory around it.
    const memoryBefore = await usedMemory(redis);
    note("bulk load, redis");
    const bulkRedisS = await onRedis.load();
    const memoryLoaded = await usedMemory(redis);
    const memoryKinds = await memoryByKind(redis, NODES);
    note("bulk load, memory");
    const bulkMemoryS = await onMemory.load();
    await onRedis.heartbeats();
    await onMemory.heartbeats();

    // Rows that need no lease, while the stores' first TTL runs down.
    note("echo floor");
    await runWrk({ ...floorOptions, durationS: 1 }); // warm-up
    const floor = await floorRun(SECONDS);
    note("/healthz");
    const health = await wrk(onRedis.pid, {
      url: onRedis.bridge.url,
      connections: RENEW_AGENTS,
      requests: [{ method: "GET", path: "/healthz" }],
    });
    note("/v1/shards");
    const shardList = await wrk(onRedis.pid, {
      url: onRedis.bridge.url,
      connections: HEAVY_CONNECTIONS,
      requests: [onRedis.shardsRequest()],
    });

    note("waiting for the leases (one TTL after each store's start)");
    await onRedis.acquire(RENEWERS);
    await onMemory.acquire(RENEWERS);
    await onRedis.checkNodeList();
    await onMemory.checkNodeList();

    const renew = async (rig: Rig) =>
      wrk(rig.pid, {
        url: rig.bridge.url,
        connections: RENEW_AGENTS,
        requests: RENEWERS.map((_, i) => rig.renewRequest(i)),
      });
    note("renew, redis");
    const renewRedis = await renew(onRedis);
    // The Redis floor just after it (the plain floor was measured just before): what any
    // Node service pays to renew in Redis per request on these two cores.
    note("echo + one EVALSHA a request");
    await runWrk({ ...floorOptions, url: echoRedis.url, durationS: 1 });
    await settle();
    const redisFloor: Run = {
      ...(await measure([echoRedis.pid], async () => ({
        result: await runWrk({ ...floorOptions, url: echoRedis.url }),
      }))),
      floor: renewRedis.floor!, // the plain floor this row's ratio is over, as the renew's
    };
    note("renew, memory");
    const renewMemory = await renew(onMemory);

    const nodeList = async (rig: Rig, connections = LIST_CONNECTIONS) => {
      const run = await wrk(rig.pid, {
        url: rig.bridge.url,
        connections,
        requests: [rig.nodeListRequest()],
      });
      await rig.checkNodeList(); // the lease was live all along: still 1,000 nodes
      return run;
    };
    note("node list, redis");
    const listRedis = await nodeList(onRedis);
    note("node list, memory");
    const listMemory = await nodeList(onMemory);
    // One caller at a time: each call's own latency, without the queue behind the others.
    note("node list, one caller, redis");
    const listRedisOne = await nodeList(onRedis, 1);
    note("node list, one caller, memory");
    const listMemoryOne = await nodeList(onMemory, 1);
    // The list's own floor: node:http answering a document of the list's size that it keeps
    // ready, as the bridge keeps the shard's listing; the bytes through the socket are most
    // of the cost, and what the machine makes of them shows in its p99.
    const listBytes = await onMemory.nodeListBytes();
    keptEcho = await startEchoServer({ answerBytes: listBytes });
    ours.push(keptEcho.pid);
    const keptFloor = async (connections: number) =>
      wrk(keptEcho!.pid, { url: keptEcho!.url, connections, requests: [{ method: "GET", path: "/" }] });
    note("node:http answering a kept document of the node list's size");
    const listFloor = await keptFloor(LIST_CONNECTIONS);
    const listFloorOne = await keptFloor(1);

    // The renew probe alone, then beside the heavy reads.
    const besides = async (rig: Rig) => {
      const probe: WrkOptions = {
        url: rig.bridge.url,
        connections: PROBE_CONNECTIONS,
        threads: 1,
        durationS: SECONDS,
        delayMs: PROBE_PAUSE_MS,
        requests: Array.from({ length: PROBE_CONNECTIONS }, (_, i) => rig.renewRequest(i)),
      };
      const heavy: WrkOptions = {
        url: rig.bridge.url,
        connections: HEAVY_CONNECTIONS,
        threads: THREADS,
        durationS: SECONDS,
        requests: [rig.nodeListRequest(), rig.shardsRequest()],
      };
      await settle();
      const alone = await measure([rig.pid], async () => ({ result: await runWrk(probe) }));
      await settle();
      await readLoop(rig.bridge.url); // a scrape resets the bridge's own record of it
      const beside = await measure([rig.pid], async () => {
        const both = await probeBeside(heavy, probe);
        return { result: both.probe, beside: both.heavy };
      });
      const delay = await readLoop(rig.bridge.url);
      await rig.checkNodeList();
      return { alone, beside, delay };
    };
    note("renew probe alone and beside the heavy load, redis");
    const probeRedis = await besides(onRedis);
    note("renew probe alone and beside the heavy load, memory");
    const probeMemory = await besides(onMemory);
    const memoryAfter = await usedMemory(redis);
    onRedis.stopKeeper();
    onMemory.stopKeeper();

    // --- report ---
    // what the machine spent besides wrk, the server and redis-server (a tick of rounding can make it negative)
    const restPct = (run: Run) =>
      Math.max(0, run.machineCpuS - run.result.cpuS - run.serverCpuS - run.redisCpuS) / run.wallS;
    const rest = (run: Run) => pct(restPct(run) * run.wallS, run.wallS);
    const ratio = (r: number) => (r >= 0.1 ? r.toFixed(2) : r.toPrecision(2));
    const vsFloor = (run: Run) => run.result.rps / run.floor!.result.rps;
    const row = (what: string, run: Run, vs: string, goal: string, met: string) => [
      what,
      run.result.rps,
      run.result.p50Ms,
      run.result.p99Ms,
      run.result.maxMs,
      run.floor?.result.rps ?? "",
      vs,
      goal,
      met,
      run.floor ? `${rest(run)} / ${rest(run.floor)}` : rest(run),
    ];
    const floorRow = (what: string, run: Run, goal = "(comparison)", met = "") =>
      row(what, run, `${ratio(vsFloor(run))}x floor`, goal, met);
    const renewRow = (what: string, run: Run) =>
      floorRow(what, run, ">= 0.5x floor", vsFloor(run) >= 0.5 ? "yes" : "no");
    const listRow = (what: string, run: Run) =>
      floorRow(what, run, "p99 < 5 ms", run.result.p99Ms < 5 ? "yes" : "no");
    const besideRows = (
      store: string,
      p: { alone: Run; beside: Run; delay: { maxMs: number; p99Ms: number } },
    ) => [
      row(
        `renew probe alone, ${store} (${PROBE_CONNECTIONS} conns, ${PROBE_PAUSE_MS} ms pause)`,
        p.alone,
        "1.00 (baseline)",
        "",
        "",
      ),
      row(
        `renew probe beside heavy reads, ${store}`,
        p.beside,
        `p99 ${(p.beside.result.p99Ms / p.alone.result.p99Ms).toFixed(1)}x alone`,
        "max <= ~10 ms",
        p.beside.result.maxMs <= 10 ? "yes" : "no",
      ),
      [
        `  the heavy reads beside it (node list + /v1/shards, ${HEAVY_CONNECTIONS} conns)`,
        p.beside.beside!.rps,
        p.beside.beside!.p50Ms,
        p.beside.beside!.p99Ms,
        p.beside.beside!.maxMs,
        "",
        "",
        "(load)",
        "",
        "",
      ],
      [
        `  the bridge's event-loop delay meanwhile (1 ms timer)`,
        "",
        "",
        p.delay.p99Ms,
        p.delay.maxMs,
        "",
        "",
        "max <= 10+1 ms",
        p.delay.maxMs <= 11 ? "yes" : "no",
        "",
      ],
    ];
    const rows = [
      row(`node:http JSON echo, floor (${RENEW_AGENTS} conns)`, floor, "1.00 (baseline)", "", ""),
      renewRow(`renew over HTTP, redis (${RENEW_AGENTS} agents, ${RENEW_AGENTS} conns)`, renewRedis),
      row(
        `  node:http + one EVALSHA a request, the Redis floor (${RENEW_AGENTS} conns)`,
        redisFloor,
        `${ratio(vsFloor(redisFloor))}x floor`,
        `renew: ${ratio(renewRedis.result.rps / redisFloor.result.rps)}x this`,
        "",
      ),
      renewRow(`renew over HTTP, memory (${RENEW_AGENTS} agents, ${RENEW_AGENTS} conns)`, renewMemory),
      floorRow(`GET /healthz, same bridge (${RENEW_AGENTS} conns)`, health),
      floorRow(`GET /v1/shards, redis (${HEAVY_CONNECTIONS} conns)`, shardList),
      listRow(`GET /v1/agents/{id}/nodes, redis (${LIST_CONNECTIONS} conns)`, listRedis),
      listRow(`GET /v1/agents/{id}/nodes, memory (${LIST_CONNECTIONS} conns)`, listMemory),
      floorRow(
        `  node:http answering a kept ${(listBytes / 1000).toFixed(0)} kB document, the list's floor (${LIST_CONNECTIONS} conns)`,
        listFloor,
      ),
      listRow("GET /v1/agents/{id}/nodes, redis (1 conn)", listRedisOne),
      listRow("GET /v1/agents/{id}/nodes, memory (1 conn)", listMemoryOne),
      floorRow("  node:http answering the same kept document (1 conn)", listFloorOne),
      ...besideRows("redis", probeRedis),
      ...besideRows("memory", probeMemory),
    ];
    printTable(
      `Bridge over HTTP, driven by wrk (${THREADS} thread${THREADS === 1 ? "" : "s"}, ${SECONDS} s a run); ` +
        `node list = ${FLEET_AGENT}'s 1,000-node shard in a ${NODES.toLocaleString("en-US")}-node mixed fleet.\n` +
        `  "floor ops/s": the echo floor measured again (${NEAR_FLOOR_SECONDS} s) just before the row; its ratio is over that. ` +
        `"rest cpu": what the rest of the machine used during the row / its floor (above ~10%: disturbed).`,
      ["what", "ops/s", "p50 ms", "p99 ms", "max ms", "floor ops/s", "ratio", "goal", "met", "rest cpu"],
      rows,
    );

    const errors = (run: Run) => `${run.result.errors} / ${run.result.non2xx}`;
    const cpuRow = (what: string, run: Run) => [
      what,
      pct(run.result.cpuS, run.wallS),
      pct(run.serverCpuS, run.wallS),
      pct(run.redisCpuS, run.wallS),
      rest(run),
      run.result.rps === 0
        ? "n/a"
        : `${Math.round((run.serverCpuS / (run.result.requests + (run.beside?.requests ?? 0))) * 1e6)}`,
      errors(run) + (run.beside ? ` (+${run.beside.errors} / ${run.beside.non2xx})` : ""),
    ];
    const withFloors: Array<[string, Run]> = [
      ["/healthz", health],
      ["/v1/shards, redis", shardList],
      ["renew, redis", renewRedis],
      ["echo + one EVALSHA a request", redisFloor],
      ["renew, memory", renewMemory],
      ["node list, redis", listRedis],
      ["node list, memory", listMemory],
      ["node list, 1 conn, redis", listRedisOne],
      ["node list, 1 conn, memory", listMemoryOne],
      ["kept document of the list's size", listFloor],
      ["kept document of the list's size, 1 conn", listFloorOne],
    ];
    printTable(
      "CPU during each run, % of one core (2 cores): wrk itself, the server under test, redis-server, and the rest of " +
        "the machine (the idle bridge, this process, anything else running); errors = socket errors / non-2xx",
      ["run", "wrk", "server", "redis", "rest", "server µs/req", "errors"],
      [
        cpuRow("echo floor", floor),
        ...withFloors.flatMap(([what, run]) => [
          cpuRow(`  echo floor before ${what}`, run.floor!),
          cpuRow(what, run),
        ]),
        cpuRow("probe alone, redis", probeRedis.alone),
        cpuRow("probe + heavy, redis", probeRedis.beside),
        cpuRow("probe alone, memory", probeMemory.alone),
        cpuRow("probe + heavy, memory", probeMemory.beside),
      ],
    );
    const disturbed = [floor, ...withFloors.flatMap(([, run]) => [run, run.floor!])]
      .concat([probeRedis, probeMemory].flatMap((p) => [p.alone, p.beside]))
      .filter((run) => restPct(run) > 0.25).length;
    if (disturbed > 0) {
      process.stdout.write(
        `  ${disturbed} run(s) shared the machine with other work (rest above 25% of a core): their numbers are low.\n`,
      );
    }

    printTable(
      `The mixed fleet over HTTP: ${NODES.toLocaleString("en-US")} nodes in bulk requests of ${BULK.toLocaleString("en-US")}; Redis INFO used_memory`,
      ["what", "value"],
      [
        ["bulk load, redis, s", bulkRedisS],
        ["bulk load, memory, s", bulkMemoryS],
        ["Redis used_memory before the load, bytes", memoryBefore],
        ["Redis bytes per node after the bulk load (goal < 300)", (memoryLoaded - memoryBefore) / NODES],
        ...memoryKinds,
        ["Redis bytes per node after every run", (memoryAfter - memoryBefore) / NODES],
        ["bench wall time, s", (performance.now() - t0) / 1000],
      ],
    );
  } finally {
    for (const bridge of bridges) await bridge.stop();
    await echoRedis.stop();
    await keptEcho?.stop();
    await redis.stop();
    await echo.stop();
  }
}
