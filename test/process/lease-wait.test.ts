import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { bridgeApp } from "../helpers/app.js";
import type { LeaseOutcome } from "../../src/core/lease/machine.js";
import {
  noWaits,
  stepWaits,
  type Refusal,
  type ShardWaits,
  type WaitAction,
} from "../../src/core/lease/waits.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { LeaseWaits } from "../../src/bridge/shards/lease-waits.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { AgentProcess, type AgentEvent } from "../helpers/agent-process.js";
import { memoryOnClock, memoryUnderTest, onClusterMasters, sharedCluster } from "../helpers/backends.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { exampleInspector } from "../helpers/examples.js";
import { listen, TEST_TOKENS, testAuthority } from "../helpers/http.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { VirtualClock } from "../helpers/virtual-clock.js";
import { seededRandom } from "../../src/runtime/random.js";
import { ClusterSetup, SentinelSetup } from "../helpers/redis-topology.js";

const held = (holder: string, token: number, ttlMs: number): Refusal => ({
  ok: false,
  reason: "held",
  current: { holder, token, ttlMs, sinceUs: 0 },
});
const granted = (holder: string, token: number): LeaseOutcome => ({
  ok: true,
  holder,
  token,
  ttlMs: 1000,
  sinceUs: 0,
});

/** Feed `events` through the rules from no waits, at the times given; every action, in order. */
function run(events: Array<[number, Parameters<typeof stepWaits<string>>[1]]>): {
  state: ShardWaits<string>;
  actions: Array<WaitAction<string>>;
} {
  let state = noWaits<string>();
  const actions: Array<WaitAction<string>> = [];
  for (const [now, event] of events) {
    const step = stepWaits(state, event, now);
    state = step.state;
    actions.push(...step.actions);
  }
  return { state, actions };
}

describe("waiting acquires: the rules (core/lease/waits.ts, pure)", () => {
  it("wakes at the lease's end as refused, tries once for the first waiter, and tells the others who holds it", () => {
    const { state, actions } = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [100, { kind: "park", waiter: "c", refusal: held("a", 7, 800) }],
      [901, { kind: "wake" }],
      [902, { kind: "tried", outcome: granted("b", 8) }],
    ]);
    expect(actions).to.deep.equal([
      { kind: "timer", at: 901 },
      { kind: "try", waiter: "b" },
      { kind: "timer", at: null },
      { kind: "answer", waiter: "b", outcome: granted("b", 8) },
      { kind: "answer", waiter: "c", outcome: held("b", 8, 1000) },
    ]);
    expect(state).to.deep.equal(noWaits());
  });

  it("refused under the same lease (renewed meanwhile): waits on, the timer at the lease's new end", () => {
    const { state, actions } = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [901, { kind: "wake" }],
      [902, { kind: "tried", outcome: held("a", 7, 600) }],
    ]);
    expect(actions.at(-1)).to.deep.equal({ kind: "timer", at: 1503 });
    expect(state.queue).to.deep.equal(["b"]);
  });

  it("refused under another lease (another bridge's waiter won): every waiter hears who holds it", () => {
    const { state, actions } = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [10, { kind: "wake" }],
      [11, { kind: "tried", outcome: held("c", 9, 1000) }],
    ]);
    expect(actions.at(-1)).to.deep.equal({ kind: "answer", waiter: "b", outcome: held("c", 9, 1000) });
    expect(state).to.deep.equal(noWaits());
  });

  it("a waiter that left before its grant: the lease is given back, the rest tried again", () => {
    const { state, actions } = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [0, { kind: "park", waiter: "c", refusal: held("a", 7, 900) }],
      [10, { kind: "wake" }],
      [11, { kind: "leave", waiter: "b" }],
      [12, { kind: "tried", outcome: granted("b", 8) }],
    ]);
    expect(actions.slice(-2)).to.deep.equal([
      { kind: "give-back", waiter: "b", token: 8 },
      { kind: "timer", at: 112 },
    ]);
    expect(state.queue).to.deep.equal(["c"]);
  });

  it("a release heard while an acquire is in flight: tried again at once, not at the lease's end", () => {
    const { actions } = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [10, { kind: "wake" }],
      [11, { kind: "wake" }],
      [12, { kind: "tried", outcome: held("a", 7, 880) }],
    ]);
    expect(actions.at(-1)).to.deep.equal({ kind: "try", waiter: "b" });
  });
});

describe("waiting acquires: a renew seen by the driver (core/lease/waits.ts, pure)", () => {
  const renewed = (token: number, ttlMs: number) =>
    ({ kind: "renewed", lease: { holder: "a", token, ttlMs, sinceUs: 0 } }) as const;

  it("moves the wake to the lease's new end, with no acquire", () => {
    const { state, actions } = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [300, renewed(7, 1000)],
      [600, renewed(7, 1000)],
    ]);
    expect(actions).to.deep.equal([
      { kind: "timer", at: 901 },
      { kind: "timer", at: 1301 },
      { kind: "timer", at: 1601 },
    ]);
    expect(state).to.include({ wakeAt: 1601, trying: null });
  });

  it("leaves the wake alone for another lease's renew, or while an acquire is in flight", () => {
    expect(
      run([
        [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
        [300, renewed(6, 1000)],
      ]).actions,
    ).to.deep.equal([{ kind: "timer", at: 901 }]);
    const trying = run([
      [0, { kind: "park", waiter: "b", refusal: held("a", 7, 900) }],
      [901, { kind: "wake" }],
      [902, renewed(7, 1000)],
    ]);
    expect(trying.actions).to.deep.equal([
      { kind: "timer", at: 901 },
      { kind: "try", waiter: "b" },
      { kind: "timer", at: null },
    ]);
  });
});

describe("waiting acquires: the rules against a lease (seeded runs)", () => {
  it("answer each waiter once, grant one at a time to a waiter still there, give back the rest, try one at a time", () => {
    const seen = { grants: 0, toldHolder: 0, givenBack: 0 };
    for (let seed = 1; seed <= 300; seed++) {
      const random = seededRandom(seed);
      // The lease the rules run against: who holds it under which token, until when.
      let lease: { holder: string; token: number; until: number } | null = {
        holder: "h",
        token: 1,
        until: 1000,
      };
      let tokens = 1;
      let now = 0;
      let state = noWaits<string>();
      let trying: string | null = null;
      let timer: number | null = null;
      const queued = new Set<string>();
      const answered = new Map<string, LeaseOutcome>();
      const refusal = (): Refusal => ({
        ok: false,
        reason: "held",
        current: { holder: lease!.holder, token: lease!.token, ttlMs: lease!.until - now, sinceUs: 0 },
      });
      const step = (event: Parameters<typeof stepWaits<string>>[1]) => {
        const result = stepWaits(state, event, now);
        state = result.state;
        for (const action of result.actions) {
          if (action.kind === "timer") timer = action.at;
          else if (action.kind === "try") {
            expect(trying, `seed ${seed}: a second try while one is in flight`).to.equal(null);
            trying = action.waiter;
          } else if (action.kind === "answer") {
            expect(answered.has(action.waiter), `seed ${seed}: ${action.waiter} answered twice`).to.equal(
              false,
            );
            expect(
              queued.has(action.waiter),
              `seed ${seed}: ${action.waiter} answered after it left`,
            ).to.equal(true);
            if (action.outcome.ok)
              expect(lease?.holder, `seed ${seed}: granted to another`).to.equal(action.waiter);
            answered.set(action.waiter, action.outcome);
            if (action.outcome.ok) seen.grants++;
            else seen.toldHolder++;
            queued.delete(action.waiter);
          } else {
            expect(queued.has(action.waiter), `seed ${seed}: gave back a waiter's lease`).to.equal(false);
            expect(lease?.token).to.equal(action.token);
            lease = null;
            seen.givenBack++;
            step({ kind: "wake" });
          }
        }
      };
      for (let i = 0; i < 60; i++) {
        now += Math.floor(random() * 300);
        if (lease !== null && lease.until <= now) lease = null; // expired
        const roll = random();
        if (roll < 0.3) {
          const waiter = `w${i}`;
          if (lease === null)
            lease = { holder: waiter, token: ++tokens, until: now + 1000 }; // granted at once
          else {
            queued.add(waiter);
            step({ kind: "park", waiter, refusal: refusal() });
          }
        } else if (roll < 0.45 && lease !== null) {
          lease.until = now + 1000; // renewed
        } else if (roll < 0.55 && lease !== null) {
          lease = null; // released
          step({ kind: "wake" });
        } else if (roll < 0.65 && queued.size > 0) {
          const gone = [...queued][Math.floor(random() * queued.size)]!;
          queued.delete(gone);
          step({ kind: "leave", waiter: gone });
        } else if (roll < 0.9 && trying !== null) {
          const waiter: string = trying;
          trying = null;
          if (lease === null) lease = { holder: waiter, token: ++tokens, until: now + 1000 };
          const outcome: LeaseOutcome =
            lease.holder === waiter
              ? { ok: true, holder: waiter, token: lease.token, ttlMs: 1000, sinceUs: 0 }
              : refusal();
          step({ kind: "tried", outcome });
        } else if (timer !== null && timer <= now) {
          step({ kind: "wake" });
        }
      }
    }
    // The runs went through every path.
    expect(seen.grants).to.be.greaterThan(100);
    expect(seen.toldHolder).to.be.greaterThan(100);
    expect(seen.givenBack).to.be.greaterThan(5);
  });
});

describe("LeaseWaits on a real store: a waiter whose client goes away leaves (virtual time)", () => {
  it("aborted, it is no longer waiting, and the release grants the one still there", async () => {
    const clock = new VirtualClock();
    const store = memoryOnClock(clock);
    const waits = new LeaseWaits(store, clock);
    const request = (agent: string) => ({ shard: "s", agent, ttlMs: 1000 });
    const holder = await store.acquire(request("compute-0"));
    if (!holder.ok) throw new Error("not granted");
    const gone = new AbortController();
    const left = waits.acquire(request("compute-1"), undefined, 5000, gone.signal);
    const stays = waits.acquire(request("compute-a"), undefined, 5000, new AbortController().signal);
    await clock.advance(20);
    expect(waits.waiting).to.equal(2);
    gone.abort();
    await left;
    expect(waits.waiting, "after its client went away").to.equal(1);
    await store.release({ shard: "s", agent: "compute-0", token: holder.token });
    await clock.advance(0);
    const outcome = await stays;
    expect(outcome).to.include({ ok: true, holder: "compute-a" });
    expect(waits.waiting).to.equal(0);
    waits.close();
    await store.close();
  });
});

describe("LeaseWaits on a real store: a holder renewing through the same bridge (virtual time)", () => {
  it("costs the waiters no acquire while it renews, and the one at its lease's end grants the lease", async () => {
    const clock = new VirtualClock();
    const store = memoryOnClock(clock);
    const waits = new LeaseWaits(store, clock);
    const ttlMs = 1000; // the least a lease may have
    const request = (agent: string) => ({ shard: "s", agent, ttlMs });
    const holder = await store.acquire(request("compute-0"));
    if (!holder.ok) throw new Error("not granted");
    let acquires = 0;
    const acquire = store.acquire.bind(store);
    store.acquire = (...args) => (acquires++, acquire(...args));
    let grantedAt: number | null = null;
    const waiting = waits
      .acquire(request("compute-1"), undefined, 5000, new AbortController().signal)
      .then((outcome) => ((grantedAt = clock.now()), outcome));
    for (let i = 0; i < 6; i++) {
      await clock.advance(Math.floor(ttlMs / 3));
      const renewed = await store.renew({ ...request("compute-0"), token: holder.token });
      expect(renewed.ok, `renew ${i}`).to.equal(true);
    }
    const lastRenewAt = clock.now();
    expect(acquires, "acquires while the holder renewed (the waiter's own first one only)").to.equal(1);
    // The wake is 1 ms past the lease's end: the store's clock rounds down (core/lease/waits.ts).
    await clock.advance(ttlMs);
    expect(grantedAt, "at the lease's end").to.equal(null);
    await clock.advance(1);
    const outcome = await waiting;
    expect(outcome).to.include({ ok: true, holder: "compute-1" });
    expect(acquires, "the one at the lease's end").to.equal(2);
    expect(grantedAt! - lastRenewAt, "granted 1 ms past the lease's end").to.equal(ttlMs + 1);
    waits.close();
    await store.close();
  });
});

describe("LeaseWaits on a real store: a long wait that nothing answered (virtual time)", () => {
  it("ends at a random moment in its last fifth, so waiters that began together ask again apart", async () => {
    const store = await memoryUnderTest().fresh();
    const clock = new VirtualClock();
    const holder = await store.acquire({ shard: "s", agent: "compute-0", ttlMs: 20_000 });
    if (!holder.ok) throw new Error("not granted");
    // draw 0: the whole wait; 0.5: 10% early; 1: a fifth early
    const draws = [0, 0.5, 1];
    const answeredAt: Array<number | null> = draws.map(() => null);
    const waiting = draws.map(async (draw, i) => {
      const waits = new LeaseWaits(store, clock, () => draw);
      const request = { shard: "s", agent: `compute-${i + 1}`, ttlMs: 20_000 };
      const outcome = await waits.acquire(request, undefined, 5000, new AbortController().signal);
      answeredAt[i] = clock.now();
      expect(outcome, `the waiter that drew ${draw}`).to.include({ ok: false, reason: "held" });
      waits.close();
    });
    await clock.advance(3999);
    expect(answeredAt, "answered before 4000 ms").to.deep.equal([null, null, null]);
    await clock.advance(1);
    expect(answeredAt, "at 4000 ms").to.deep.equal([null, null, 4000]);
    await clock.advance(499);
    expect(answeredAt, "at 4499 ms").to.deep.equal([null, null, 4000]);
    await clock.advance(1);
    expect(answeredAt, "at 4500 ms").to.deep.equal([null, 4500, 4000]);
    await clock.advance(500);
    expect(answeredAt, "at 5000 ms").to.deep.equal([5000, 4500, 4000]);
    await Promise.all(waiting);
    await store.close();
  });
});

/** `n` bridges on one store, as `n` serve processes would be: each its own connection. */
async function bridgesOn(spec: string, n: number) {
  const catalog = new ShardCatalog([{ name: "rack", lease_ttl_ms: 1000 }] as never);
  const stores: Store[] = [];
  const urls: string[] = [];
  const closers: Array<() => Promise<void>> = [];
  for (let i = 0; i < n; i++) {
    const store = await openStore(spec);
    stores.push(store);
    const bridge = await listen(
      bridgeApp(store, { authority: testAuthority(), catalog, inspector: exampleInspector() }),
    );
    urls.push(bridge.url);
    closers.push(bridge.close);
  }
  return {
    url: (i: number) => urls[i]!,
    client: (i: number, agent: string) => new BridgeClient(urls[i]!, TEST_TOKENS.agent(agent), 2000),
    async stop() {
      for (const close of closers) await close();
      for (const store of stores) await store.close();
    },
  };
}

/**
 * compute-0 holds `rack` through bridge 0 and compute-1 waits for it through bridge 1;
 * compute-0 releases: the waiter's outcome, and how long after the release was sent.
 */
async function releaseToWaiter(two: Awaited<ReturnType<typeof bridgesOn>>) {
  const holder = two.client(0, "compute-0");
  const token = await acquireWhenReady(holder, "rack", "compute-0");
  const waiting = two.client(1, "compute-1").acquire({ shard: "rack", agent: "compute-1", waitMs: 5000 });
  // 150 ms: the waiting acquire reaches the other bridge a few ms after it is sent (on a
  // loaded machine 97 ms waited after a 100 ms sleep, seen once), and the wait must be 100.
  await sleep(150);
  const releasedAt = performance.now();
  await holder.release({ shard: "rack", agent: "compute-0", token });
  const outcome = await waiting;
  return { outcome, ms: performance.now() - releasedAt };
}

describe("a waiting acquire over HTTP (two bridges on one redis-server)", function () {
  this.timeout(30_000);
  let server: TestRedisServer;
  let two: Awaited<ReturnType<typeof bridgesOn>>;
  before(async () => {
    server = await TestRedisServer.start();
    two = await bridgesOn(server.url, 2);
  });
  after(async () => {
    await two?.stop();
    await server?.stop();
  });

  const hold = async (agent: string) => {
    const client = two.client(0, agent);
    return { client, token: await acquireWhenReady(client, "rack", agent) };
  };

  it("a release through one bridge grants a waiter on the other at once (the store's announcement)", async () => {
    const { outcome, ms } = await releaseToWaiter(two);
    // Given back before anything is asserted: the tests after this one hold the same shard.
    if (outcome.ok)
      await two.client(1, "compute-1").release({ shard: "rack", agent: "compute-1", token: outcome.token });
    console.log(`      granted ${ms.toFixed(1)} ms after the release was sent, through the other bridge`);
    expect(outcome).to.include({ ok: true, holder: "compute-1" });
    expect(outcome.waitedMs).to.be.at.least(100);
    // 2-5 ms measured; the slack is a loaded 2-core machine's.
    expect(ms).to.be.below(250);
  });

  it("an expiry is found at the lease's end by the waiter's bridge: TTL after the holder's last renew, never before", async () => {
    const { client, token } = await hold("compute-0");
    const renewSentAt = performance.now();
    const renewed = await client.renew({ shard: "rack", agent: "compute-0", token });
    expect(renewed.ok).to.equal(true);
    const outcome = await two
      .client(1, "compute-1")
      .acquire({ shard: "rack", agent: "compute-1", waitMs: 5000 });
    const afterTtlMs = performance.now() - renewSentAt - 1000;
    console.log(`      granted ${afterTtlMs.toFixed(1)} ms after TTL from the holder's last renew`);
    expect(outcome).to.include({ ok: true, holder: "compute-1" });
    expect(afterTtlMs).to.be.at.least(0);
    expect(afterTtlMs).to.be.below(250);
    await sleep(1100); // its lease runs out too
  });

  it("two waiters, one lease: one is granted, the other hears who holds it, each after its wait", async () => {
    const { client, token } = await hold("compute-0");
    const b = two.client(0, "compute-1").acquire({ shard: "rack", agent: "compute-1", waitMs: 5000 });
    await sleep(20);
    const c = two.client(0, "compute-a").acquire({ shard: "rack", agent: "compute-a", waitMs: 5000 });
    await sleep(50);
    await client.release({ shard: "rack", agent: "compute-0", token });
    const [first, second] = await Promise.all([b, c]);
    expect(first).to.include({ ok: true, holder: "compute-1" });
    expect(second).to.deep.include({ ok: false, reason: "held" });
    expect((second as Refusal).current?.holder).to.equal("compute-1");
    expect(second.waitedMs).to.be.at.least(50);
    await sleep(1100);
  });

  it("a waiter whose client hangs up leaves: the release grants the one still there, at once", async () => {
    const { client, token } = await hold("compute-0");
    const hangUp = new AbortController();
    const left = fetch(`${two.url(1)}/v1/shards/rack/lease`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TEST_TOKENS.agent("compute-1")}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ agent: "compute-1", wait_ms: 5000 }),
      signal: hangUp.signal,
    }).catch((error: Error) => error.name);
    await sleep(50);
    hangUp.abort();
    expect(await left).to.equal("AbortError");
    const staying = two.client(1, "compute-a").acquire({ shard: "rack", agent: "compute-a", waitMs: 5000 });
    await sleep(50);
    const releasedAt = performance.now();
    await client.release({ shard: "rack", agent: "compute-0", token });
    // Had the first waiter stayed queued, it would be granted a lease nobody hears of, and
    // compute-a refused behind it for a TTL.
    const outcome = await staying;
    expect(outcome).to.include({ ok: true, holder: "compute-a" });
    expect(performance.now() - releasedAt).to.be.below(250);
    await two
      .client(1, "compute-a")
      .release({ shard: "rack", agent: "compute-a", token: (outcome as { token: number }).token });
  });

  it("the wait ends: a plain acquire's answer, after wait_ms", async () => {
    const { client, token } = await hold("compute-0");
    const renewing = setInterval(() => void client.renew({ shard: "rack", agent: "compute-0", token }), 300);
    try {
      const started = performance.now();
      const outcome = await two
        .client(1, "compute-1")
        .acquire({ shard: "rack", agent: "compute-1", waitMs: 1500 });
      expect(outcome).to.deep.include({ ok: false, reason: "held" });
      expect(performance.now() - started).to.be.at.least(1500);
      expect(outcome.waitedMs).to.be.at.least(1500);
    } finally {
      clearInterval(renewing);
    }
    await client.release({ shard: "rack", agent: "compute-0", token });
  });

  it("a shard whose definition goes while standbys wait: they hear 404 shard.undefined as a plain acquire would, never a grant", async () => {
    const admin = (i: number, method: string, path: string, body?: unknown) =>
      fetch(`${two.url(i)}${path}`, {
        method,
        headers: { authorization: `Bearer ${TEST_TOKENS.admin}`, "content-type": "application/json" },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    expect(
      (await admin(0, "PUT", "/v1/shard-definitions/rack-gone", { lease_ttl_ms: 1000 })).status,
    ).to.equal(201);
    const holder = two.client(0, "compute-0");
    const token = await acquireWhenReady(holder, "rack-gone", "compute-0");
    // One wakes at the lease's end, one's wait ends before it: each path asks the store again.
    const atExpiry = two
      .client(1, "compute-1")
      .acquire({ shard: "rack-gone", agent: "compute-1", waitMs: 5000 });
    const atWaitEnd = two
      .client(1, "compute-a")
      .acquire({ shard: "rack-gone", agent: "compute-a", waitMs: 400 });
    await sleep(100);
    expect((await admin(1, "DELETE", "/v1/shard-definitions/rack-gone")).status).to.equal(204);
    const answers = await Promise.allSettled([atExpiry, atWaitEnd]);
    for (const answer of answers) {
      expect(answer.status, JSON.stringify(answer)).to.equal("rejected");
      const error = (answer as PromiseRejectedResult).reason as { status: number; code: string };
      expect({ status: error.status, code: error.code }).to.deep.equal({
        status: 404,
        code: "shardbridge.shard.undefined",
      });
    }
    // The store's own record: no lease was granted after compute-0's.
    const state = (await (await admin(0, "GET", "/v1/shards/rack-gone/lease")).json()) as {
      lease: unknown;
      last_token: number;
    };
    expect(state).to.deep.include({ lease: null, last_token: token });
  });

  it("refuses a wait over 30 s, or with a renew's token, naming wait_ms", async () => {
    const post = (body: object) =>
      fetch(`${two.url(0)}/v1/shards/rack/lease`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${TEST_TOKENS.agent("compute-1")}`,
          "content-type": "application/json",
        },
        body: JSON.stringify(body),
      });
    for (const body of [
      { agent: "compute-1", wait_ms: 30_001 },
      { agent: "compute-1", wait_ms: 1.5 },
      { agent: "compute-1", token: 12, wait_ms: 100 },
    ]) {
      const answer = await post(body);
      expect(answer.status, JSON.stringify(body)).to.equal(400);
      const { errors } = (await answer.json()) as { errors: Array<{ field: string }> };
      expect(errors.map((e) => e.field)).to.include("wait_ms");
    }
  });
});

// Plain pub/sub on a Sentinel-managed master and across a Cluster's bus: the same
// announcement, each bridge subscribed on a connection of its own.
for (const [topology, start, stop] of [
  [
    "Sentinel (a master, a replica, three sentinels)",
    () => SentinelSetup.start({ replicas: 1 }),
    (s: SentinelSetup | ClusterSetup) => s.stop(),
  ],
  [
    "Cluster (three masters, a replica each)",
    () => sharedCluster(),
    (s: SentinelSetup | ClusterSetup) =>
      onClusterMasters(s as ClusterSetup, (admin) => admin.flushall()).then(() => undefined),
  ],
] as const)
  describe(`a release announced to the other bridge on Redis ${topology}`, function () {
    this.timeout(60_000);
    let setup: SentinelSetup | ClusterSetup;
    let two: Awaited<ReturnType<typeof bridgesOn>>;
    before(async () => {
      setup = await start();
      two = await bridgesOn(setup.storeSpec(), 2);
    });
    after(async () => {
      await two?.stop();
      if (setup !== undefined) await stop(setup);
    });

    it("grants the waiter on the other bridge at once", async () => {
      const { outcome, ms } = await releaseToWaiter(two);
      console.log(`      granted ${ms.toFixed(1)} ms after the release was sent`);
      expect(outcome).to.include({ ok: true, holder: "compute-1" });
      // A few ms (each write waits for a replica); the slack is a loaded 2-core machine's.
      expect(ms).to.be.below(250);
    });
  });

/** Percentile `p` (0..1) of `values`, nearest rank. */
const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(p * values.length) - 1)]!;

/**
 * Reference agents (test/fixtures/lease-agent.ts through a bridge: bridgeKeeper, waiting)
 * handing a shard over, timed from their own records: the `t` (wall ms) of each line.
 */
describe("standbys that wait: handover and failover from the agents' own records (real bridge, agent processes)", function () {
  this.timeout(120_000);
  const TTL_MS = 1000;
  let bridge: BridgeProcess;
  const agents: AgentProcess[] = [];
  before(async () => {
    bridge = await startBridge({
      shards: [{ name: "rack-w", lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
    });
  });
  after(async () => {
    for (const a of agents) await a.kill();
    await bridge?.stop();
  });
  const agent = (name: string) => {
    const a = AgentProcess.spawnFixture(name, [
      ...["--bridge", bridge.url, "--token", bridge.tokenOf(name), "--shard", "rack-w", "--agent", name],
      ...["--write-every", "1000"],
    ]);
    agents.push(a);
    return a;
  };
  const activeOf = (a: AgentProcess, from = 0) => a.waitFor((e) => e.ev === "active", 15_000, from);

  it("SIGTERM of the holder: the standby is granted at once (20 handovers; goal 50 ms at p99)", async () => {
    let holder = agent("host-a");
    await activeOf(holder);
    let standby = agent("host-b");
    await standby.waitFor((e) => e.ev === "standby", 15_000);
    const handovers: number[] = [];
    /** per standby: the acquires it sent from its start to its grant, by its own record */
    const asked: number[] = [];
    for (let i = 0; i < 20; i++) {
      await sleep(150); // the standby's waiting acquire is at the bridge
      const from = standby.events.length;
      const signalledAt = Date.now();
      holder.signal("SIGTERM");
      const active: AgentEvent = await activeOf(standby, from);
      handovers.push(active.t - signalledAt);
      asked.push(standby.events.filter((e) => e.ev === "acquire-sent" && e.t <= active.t).length);
      await holder.exited();
      const next = agent(holder.name);
      await next.waitFor((e) => e.ev === "standby", 15_000);
      [holder, standby] = [standby, next];
    }
    const p50 = percentile(handovers, 0.5);
    const p95 = percentile(handovers, 0.95);
    const p99 = percentile(handovers, 0.99);
    console.log(
      `      SIGTERM to the standby's grant: p50 ${p50} ms, p95 ${p95} ms, p99 ${p99} ms; all ${handovers.join(" ")}`,
    );
    // The goal is 50 ms at p99; measured p99 9-37 ms over 20, with two busy loops beside it
    // too. The bound: twice the goal at p95 (one of 20 may be slower), for a 2-core machine
    // that other test runs load; a standby that waited for the expiry instead (1 s) fails it.
    expect(p95).to.be.at.most(100);
    // Standby traffic: one acquire as it starts (answered at once: whom it stands behind),
    // one that waits and is granted; polling, a standby's ~0.5 s here would be 2-4 more.
    console.log(`      acquires each standby sent until its grant: ${asked.join(" ")}`);
    expect(Math.max(...asked)).to.be.at.most(2);
  });

  it("kill -9 of the holder: the standby is granted TTL after the holder's last renew, + at most 50 ms", async () => {
    const holder = agents.find((a) => a.events.some((e) => e.ev === "active") && a.child.exitCode === null)!;
    const standby = agents.find((a) => a !== holder && a.child.exitCode === null)!;
    await sleep(700); // a few renews
    const from = standby.events.length;
    holder.signal("SIGKILL");
    await holder.exited();
    const active = await activeOf(standby, from);
    const renews = holder.events.filter((e) => e.ev === "renewed");
    const last = renews.at(-1)!;
    // Sent `latencyMs` before its line was written: the store counts the TTL from no earlier.
    const lastRenewSent = last.t - Number(last.latencyMs);
    const afterTtl = active.t - lastRenewSent - TTL_MS;
    console.log(
      `      granted ${afterTtl.toFixed(1)} ms after TTL from the last renew sent (${renews.length} renews)`,
    );
    expect(afterTtl).to.be.at.least(-2); // never before the TTL (the log's ms rounding aside)
    // Goal: 50 ms; 100 for a loaded 2-core machine.
    expect(afterTtl).to.be.at.most(100);
  });
});
