import { expect } from "chai";
import { ReplicaAckError } from "../src/store/redis/backend.js";
import { openStore } from "../src/store/open.js";
import type { Store } from "../src/store/store.js";
import { AgentProcess } from "./helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { SentinelSetup } from "./helpers/redis-topology.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Until `acquire` grants, polling every 100 ms: the outcomes on the way, and when it granted. */
async function acquireWhenGranted(
  store: Store,
  shard: string,
  agent: string,
  ttlMs: number,
  timeoutMs: number,
) {
  const started = performance.now();
  const refusals: string[] = [];
  for (;;) {
    try {
      const outcome = await store.acquire({ shard, agent, ttlMs });
      if (outcome.ok) return { outcome, refusals, afterMs: performance.now() - started };
      refusals.push(outcome.reason);
    } catch (error) {
      refusals.push(`error: ${(error as Error).message.slice(0, 60)}`);
    }
    if (performance.now() - started > timeoutMs)
      throw new Error(
        `${agent} not granted ${shard} within ${timeoutMs} ms: ${refusals.slice(-5).join(", ")}`,
      );
    await sleep(100);
  }
}

/**
 * Leases on Redis Sentinel (one master, two replicas, three sentinels, all real servers
 * the harness starts): a lease write is answered only once a replica has it, and a
 * replica promoted without the last grant holds every shard for a TTL instead of granting
 * it to a second agent while the first still acts.
 */
describe("Leases on Redis Sentinel (real redis-server and redis-sentinel)", function () {
  this.timeout(120_000);
  let setup: SentinelSetup;
  let store: Store;

  beforeEach(async () => {
    setup = await SentinelSetup.start({ replicas: 2, failoverTimeoutMs: 3000 });
    store = await openStore(setup.storeSpec(), { replicaAckMs: 250 });
  });
  afterEach(async () => {
    await store?.close();
    await setup?.stop();
  });

  it("grants and renews through the sentinels' master, each write acknowledged by a replica; none in time: refused, not reported", async () => {
    // A store that just started holds shards it has no history of for one TTL (1 s here).
    const { outcome } = await acquireWhenGranted(store, "s1", "a", 1000, 5000);
    const renewed = await store.renew({ shard: "s1", agent: "a", token: outcome.token, ttlMs: 1000 });
    expect(renewed).to.include({ ok: true, token: outcome.token });
    const [r1, r2] = setup.servers().filter((s) => s.role === "replica");
    for (const replica of [r1!, r2!])
      expect(await setup.replicationOffset(replica.port)).to.be.greaterThan(0);

    // s2 gets a history (a store holds a shard it has none of for a TTL after it started).
    const s2 = await acquireWhenGranted(store, "s2", "x", 1000, 5000);
    await store.release({ shard: "s2", agent: "x", token: s2.outcome.token });

    // Both replicas frozen: the write happens on the master alone, and is refused as not done.
    setup.freeze(r1!.port);
    setup.freeze(r2!.port);
    try {
      const started = performance.now();
      const error = await store.renew({ shard: "s1", agent: "a", token: outcome.token, ttlMs: 1000 }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error, "a renew no replica acknowledged was reported as done").to.not.equal(null);
      expect((error as Error & { cause?: unknown }).cause).to.be.instanceOf(ReplicaAckError);
      expect(performance.now() - started, "the wait is bounded").to.be.below(1500);
      // A grant no replica acknowledged is refused too, and taken back: b never acts on
      // it, and it must not hold s2 against everyone for a TTL once the replicas return.
      const grant = await store.acquire({ shard: "s2", agent: "b", ttlMs: 60_000 }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect((grant as Error & { cause?: unknown })?.cause).to.be.instanceOf(ReplicaAckError);
    } finally {
      setup.thaw(r1!.port);
      setup.thaw(r2!.port);
    }
    await setup.waitUntilInSync(r1!.port);
    const again = await store.renew({ shard: "s1", agent: "a", token: outcome.token, ttlMs: 1000 });
    expect(again).to.include({ ok: true });
    expect((await store.read("s2")).current, "the unacknowledged grant of s2").to.equal(null);
    const other = await store.acquire({ shard: "s2", agent: "c", ttlMs: 1000 });
    expect(other, "s2 granted at once to another agent").to.include({ ok: true, holder: "c" });
  });

  it("one sentinel of three frozen when the master dies: the store reconnects through the others", async () => {
    // ioredis asks one sentinel at a time; this one accepts the connection and never
    // answers. Without a timeout on that question, or when the failover detector's
    // disconnect aborts the reconnect waiting on it, the connection never came back.
    const { outcome } = await acquireWhenGranted(store, "s1", "a", 1000, 5000);
    setup.freeze(setup.sentinels[0]!.port);
    const master = (await setup.currentMaster()).port;
    await setup.kill(master);
    const promotion = await setup.waitForNewMaster(master, 30_000);
    const started = performance.now();
    // After the promotion the lineage hold (one TTL) answers "recovering": any answer
    // at all means the store is reachable again.
    let answer: unknown = null;
    while (performance.now() - started < 10_000) {
      answer = await store.read("s1").catch((e: Error) => e);
      if (!(answer instanceof Error)) break;
      await sleep(100);
    }
    console.log(
      `      promoted after ${promotion.agreedMs.toFixed(0)} ms; the store answered ${(performance.now() - started).toFixed(0)} ms later`,
    );
    expect(answer, "the store after the failover").to.not.be.instanceOf(Error);
    expect((answer as Awaited<ReturnType<Store["read"]>>).lastToken).to.be.at.least(outcome.token);
    setup.thaw(setup.sentinels[0]!.port);
  });

  it("a replica promoted without the last grant holds the shard for a TTL: no second holder while the first acts, tokens still climb", async () => {
    const ttlMs = 10_000;
    const master = (await setup.currentMaster()).port;
    const [withWrite, withoutWrite] = setup.servers().filter((s) => s.role === "replica");
    // A store that just started holds a shard with no history for a TTL: give s1 a history
    // with a short lease first (its boot hold is 1 s), handed back.
    const first = await acquireWhenGranted(store, "s1", "a", 1000, 5000);
    await store.release({ shard: "s1", agent: "a", token: first.outcome.token });

    // The replica that will be promoted falls behind: frozen, with the replication stream
    // filled so that what comes next waits in the master's memory and dies with it.
    setup.freeze(withoutWrite!.port);
    await setup.fillReplicationBuffers({ stalledReplicas: 1 });
    const granted = await store.acquire({ shard: "s1", agent: "a", ttlMs });
    expect(granted.ok, "a's grant, acknowledged by the other replica").to.equal(true);
    const tokenOfA = (granted as { token: number }).token;
    const grantedAt = performance.now();

    // The replica that has the grant goes down with the master; the one without it is the
    // only one left to promote.
    setup.freeze(withWrite!.port);
    await setup.kill(master);
    setup.thaw(withoutWrite!.port);
    const promotion = await setup.waitForNewMaster(master, 30_000);
    expect(promotion.port).to.equal(withoutWrite!.port);
    // The test proves something only if the grant really is missing there.
    const promoted = setup.client(promotion.port);
    expect(
      await promoted.hget("sb:{shard:s1}:lease", "holder"),
      "a's grant on the promoted replica",
    ).to.equal(null);

    // The other replica comes back (the sentinels make it a replica of the new master, its
    // copy of a's grant replaced): writes can be acknowledged again.
    setup.thaw(withWrite!.port);

    // b asks over and over: every answer until one TTL after the store noticed is "recovering".
    const b = await acquireWhenGranted(store, "s1", "b", ttlMs, 40_000);
    const grantedToBMs = performance.now() - grantedAt;
    console.log(
      `      promoted after ${promotion.elapsedMs.toFixed(0)} ms; b granted ${grantedToBMs.toFixed(0)} ms after a's grant ` +
        `(a's lease ran ${ttlMs} ms; refusals: ${[...new Set(b.refusals)].join(", ")})`,
    );
    expect(b.refusals, "b was held, not granted at once").to.include("recovering");
    expect(grantedToBMs, "b granted while a's lease could still run").to.be.at.least(ttlMs);
    expect(b.outcome.token, "tokens climb across the failover").to.be.above(tokenOfA);
    // a, renewing now, hears it no longer holds the shard, and cannot pass the fence.
    const renew = await store.renew({ shard: "s1", agent: "a", token: tokenOfA, ttlMs });
    expect(renew.ok).to.equal(false);
    expect((await store.fence({ shard: "s1", token: tokenOfA })).allowed).to.equal(false);
    expect((await store.fence({ shard: "s1", token: b.outcome.token })).allowed).to.equal(true);
  });
});

/**
 * Two bridges on one Sentinel-managed Redis, three reference agents on one shard (two on
 * one bridge, one on the other), and a fault of the master: by the agents' own logs never
 * two active at once, tokens rising at every new holder, and a holder again soon after
 * the promotion (Sentinel's failover, then at most one hold of a TTL, then a poll).
 */
describe("Two bridges on Redis Sentinel, agents on one shard, a fault of the master (real processes)", function () {
  this.timeout(180_000);
  const TTL_MS = 3000;
  let setup: SentinelSetup;
  let bridges: BridgeProcess[] = [];
  let agents: AgentProcess[] = [];
  /** wall-clock ms of the fault, for the timeline printed when a test fails */
  let faultAt = 0;

  beforeEach(async () => {
    faultAt = 0;
    setup = await SentinelSetup.start({ replicas: 2, failoverTimeoutMs: 3000 });
    for (let i = 0; i < 2; i++)
      bridges.push(
        await startBridge({
          shards: [{ name: "rack-s", lease_ttl_ms: TTL_MS }],
          agents: ["host-a", "host-b", "host-c"],
          store: setup.storeSpec(),
          // every request with its status: what each bridge answered during the fault
          env: { SHARDBRIDGE_LOG_LEVEL: "debug" },
        }),
      );
  });
  afterEach(async function () {
    if (this.currentTest?.state === "failed" && faultAt > 0) console.log(timeline(faultAt - 2000));
    for (const a of agents) await a.kill();
    for (const b of bridges) await b.stop();
    await setup?.stop();
    agents = [];
    bridges = [];
  });

  /** Each agent's spells of acting, from its own log: [from, to) wall-clock ms, and the token. */
  const spells = () =>
    agents.flatMap((a) => {
      const out: Array<{ agent: string; token: number; from: number; to: number }> = [];
      let open: { token: number; from: number } | null = null;
      for (const e of a.events) {
        const at = Date.parse(String(e.timestamp));
        if (e.ev === "active") open = { token: Number(e.token), from: at };
        if ((e.ev === "lost" || e.ev === "released") && open !== null) {
          out.push({ agent: a.name, ...open, to: at });
          open = null;
        }
      }
      if (open !== null) out.push({ agent: a.name, ...open, to: Infinity });
      return out;
    });

  /**
   * What every participant saw from `sinceMs` on, in time order, ms relative to the fault:
   * the agents' own events (transitions, refusals with retry_after_ms, bridge errors),
   * each bridge's answers (runs of one status per path folded into one line) and errors,
   * and the Redis and sentinel logs (promotion, resyncs).
   */
  function timeline(sinceMs: number): string {
    const rows: Array<{ at: number; who: string; text: string }> = [];
    const field = (e: Record<string, unknown>, ...names: string[]) =>
      names
        .filter((n) => e[n] !== undefined && e[n] !== null)
        .map((n) => `${n}=${typeof e[n] === "string" ? (e[n] as string) : JSON.stringify(e[n])}`)
        .join(" ");
    for (const a of agents)
      for (const e of a.events) {
        if (e.ev === "nodes" || e.ev === "traits") continue;
        rows.push({
          at: Date.parse(String(e.timestamp)),
          who: a.name,
          text: `${e.ev} ${field(e, "token", "reason", "holder", "ttl_ms", "retry_after_ms", "detail", "op", "error")}`,
        });
      }
    bridges.forEach((bridge, i) => {
      // one line per run of one answer (path and status) without a gap of a second
      const runs: Array<{ key: string; from: number; to: number; count: number; ms: number }> = [];
      const open = new Map<string, (typeof runs)[number]>();
      for (const e of bridge.serve.events) {
        const at = Date.parse(String(e.timestamp));
        if (e.ev !== "request" && e.ev !== "slow request") {
          rows.push({ at, who: `bridge${i}`, text: `${e.ev} ${field(e, "error", "path")}` });
          continue;
        }
        const key = `${String(e.path).replace(/^\/v1\/shards\/rack-s\/lease/, "lease")} ${String(e.status)}`;
        const run = open.get(key);
        if (run !== undefined && at - run.to <= 1000) {
          run.to = at;
          run.count++;
          run.ms = Math.max(run.ms, Number(e.ms));
        } else {
          const fresh = { key, from: at, to: at, count: 1, ms: Number(e.ms) };
          runs.push(fresh);
          open.set(key, fresh);
        }
      }
      for (const run of runs) {
        const span = run.to > run.from ? ` until ${run.to - faultAt}` : "";
        rows.push({
          at: run.from,
          who: `bridge${i}`,
          text: `${run.key} x${run.count}${span} (max ${run.ms} ms)`,
        });
      }
    });
    for (const line of setup.logsSince(sinceMs)) rows.push({ ...line, who: line.source });
    return rows
      .filter((r) => r.at >= sinceMs)
      .sort((x, y) => x.at - y.at)
      .map((r) => `      ${String(r.at - faultAt).padStart(7)} ${r.who.padEnd(15)} ${r.text}`)
      .join("\n");
  }

  const faults: Array<[string, (master: number) => Promise<void>]> = [
    ["killed -9", (master) => setup.kill(master)],
    // Frozen past the sentinels' down-after: promoted around it, then it wakes up still
    // believing it is master, with clients on it, until the sentinels demote it.
    [
      "frozen (SIGSTOP) past down-after, then resumed",
      async (master) => {
        setup.freeze(master);
        await setup.waitForNewMaster(master, 30_000);
        setup.thaw(master);
      },
    ],
    // SENTINEL FAILOVER: the old master stays a writable master for ~10 s after it.
    ["handed over by SENTINEL FAILOVER", async () => void (await setup.sentinelFailover())],
  ];

  for (const [name, fault] of faults)
    it(`master ${name}: never two agents active, tokens rising, a holder again within failover + TTL + hold + 2 s`, async () => {
      const join = (agent: string, bridge: BridgeProcess) =>
        AgentProcess.cli(agent, [
          ...["agent", "--id", agent, "--shard", "rack-s", "--bridge", bridge.url],
          ...["--token", bridge.tokenOf(agent)],
        ]);
      agents = [join("host-a", bridges[0]!), join("host-b", bridges[1]!), join("host-c", bridges[0]!)];
      await Promise.race(agents.map((a) => a.waitFor((e) => e.ev === "active", 20_000)));
      await sleep(TTL_MS); // a few renews through both bridges
      const master = (await setup.currentMaster()).port;
      faultAt = Date.now();
      await fault(master);
      const promotion = await setup.waitForNewMaster(master, 30_000);
      const deadline = performance.now() + 2 * TTL_MS + 15_000;
      while (!spells().some((s) => s.from > faultAt) && performance.now() < deadline) await sleep(100);
      const after = spells().filter((s) => s.from > faultAt);
      expect(after.length, "an agent active again after the failover").to.be.greaterThan(0);
      const backMs = Math.min(...after.map((s) => s.from)) - faultAt;
      const promotedMs = faultAt + promotion.agreedMs;
      console.log(
        `      a holder again ${backMs} ms after the fault ` +
          `(spells: ${spells()
            .map((s) => `${s.agent}/${s.token}`)
            .join(", ")})`,
      );
      expect(Math.min(...after.map((s) => s.from)) - promotedMs).to.be.below(2 * TTL_MS + 2000);
      await sleep(TTL_MS);
      const all = spells().sort((x, y) => x.from - y.from);
      for (let i = 1; i < all.length; i++) {
        expect(all[i]!.from, `${all[i]!.agent} active before ${all[i - 1]!.agent} stopped`).to.be.at.least(
          all[i - 1]!.to,
        );
        expect(all[i]!.token, "tokens rise at every new holder").to.be.above(all[i - 1]!.token);
      }
    });
});
