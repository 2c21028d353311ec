import { expect } from "chai";
import fc from "fast-check";
import type { StoreLineage } from "../../src/core/lease/machine.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import type { LeaseBackend } from "../../src/store/ports/leases.js";
import { RedisLeases } from "../../src/store/redis/leases.js";
import { onClusterMasters, sharedCluster } from "../helpers/backends.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/**
 * Thousands of seeded random operation sequences run against the memory backend (the
 * pure state machine) and the Redis backend (the Lua scripts), both driven by one virtual
 * clock, must give identical outcomes at every step: the Lua is a faithful second
 * rendering of the one definition of lease semantics. On one redis-server and on a real
 * Redis Cluster, where a script touching keys of two slots would fail.
 */

const SHARDS = ["s1", "s2"];
const AGENTS = ["a", "b", "c"];
const TTLS = [1000, 2000, 6000];
/** What a grant keeps of its fence key (none, or one of two): a fence presents one of them, or none. */
const KEY_DIGESTS = ["", "digest-1", "digest-2"];

type Step =
  | { kind: "acquire"; shard: number; agent: number; ttl: number; key: number; advanceMs: number }
  | { kind: "renew" | "release"; shard: number; agent: number; token: number; ttl: number; advanceMs: number }
  /** `key` 0: the fence presents no key ("" and none are one) */
  | { kind: "fence"; shard: number; token: number; key: number; advanceMs: number }
  | { kind: "read"; shard: number; advanceMs: number }
  | { kind: "heartbeat"; agent: number; shard: number; advanceMs: number }
  | { kind: "agents"; advanceMs: number }
  /** the store's lineage changes: a restart from its files (0), a replica promoted (1) */
  | { kind: "lineage"; promoted: number; advanceMs: number };

const index = (n: number) => fc.nat({ max: n - 1 });
// Mostly small steps so leases live across several operations; some jumps past any TTL;
// exact multiples so expiry boundaries are hit on the microsecond.
const advance = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 800 }) },
  { weight: 2, arbitrary: fc.constantFrom(0, 1000, 2000, 6000) },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 8000 }) },
);
// A token choice: a token seen so far, or one off it either way (choice / 3 picks the
// token, choice % 3 the offset), or, when negative, a made-up token.
const tokenChoice = fc.integer({ min: -2, max: 60 });

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("acquire" as const),
      shard: index(2),
      agent: index(3),
      ttl: index(3),
      key: index(KEY_DIGESTS.length),
      advanceMs: advance,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("renew" as const),
      shard: index(2),
      agent: index(3),
      token: tokenChoice,
      ttl: index(3),
      advanceMs: advance,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("release" as const),
      shard: index(2),
      agent: index(3),
      token: tokenChoice,
      ttl: index(3),
      advanceMs: advance,
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("fence" as const),
      shard: index(2),
      token: tokenChoice,
      key: index(KEY_DIGESTS.length),
      advanceMs: advance,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("read" as const), shard: index(2), advanceMs: advance }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("heartbeat" as const),
      agent: index(3),
      shard: index(SHARDS.length),
      advanceMs: advance,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("agents" as const), advanceMs: advance }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("lineage" as const), promoted: index(2), advanceMs: advance }),
  },
);

function pickToken(seen: number[], choice: number): number {
  if (choice < 0 || seen.length === 0) return 1 + Math.abs(choice);
  return seen[Math.floor(choice / 3) % seen.length]! + (choice % 3) - 1;
}

function runStep(backend: LeaseBackend, s: Step, token: number): Promise<unknown> {
  switch (s.kind) {
    case "acquire":
      return backend.acquire({
        shard: SHARDS[s.shard]!,
        agent: AGENTS[s.agent]!,
        ttlMs: TTLS[s.ttl]!,
        keyDigest: KEY_DIGESTS[s.key]!,
      });
    case "renew":
      return backend.renew({ shard: SHARDS[s.shard]!, agent: AGENTS[s.agent]!, token, ttlMs: TTLS[s.ttl]! });
    case "release":
      return backend.release({ shard: SHARDS[s.shard]!, agent: AGENTS[s.agent]!, token });
    case "fence":
      return backend.fence({ shard: SHARDS[s.shard]!, token, keyDigest: KEY_DIGESTS[s.key]! });
    case "read":
      return backend.read(SHARDS[s.shard]!);
    case "heartbeat":
      // Half the heartbeats declare a shard, half join the legacy pool: both must be kept alike.
      return backend.heartbeat(AGENTS[s.agent]!, s.shard % 2 === 0 ? [SHARDS[s.shard]!] : [], "", 60_000);
    case "agents":
      return backend.agents();
    case "lineage":
      return Promise.resolve(null); // the clock's lineage moved (see the test): nothing to call
  }
}

/**
 * Where the Lua runs: one redis-server, or the shared Redis Cluster (every script must
 * touch one slot; lease writes there also WAIT for a replica). `flush` empties it.
 */
interface LuaTarget {
  name: string;
  /** seeded sequences to run: fewer on Cluster, where every lease write waits for a replica */
  runs: number;
  start(): Promise<{ spec: string; flush(): Promise<unknown>; stop(): Promise<void> }>;
}

const targets: LuaTarget[] = [
  {
    name: "redis (Lua)",
    runs: 2000,
    start: async () => {
      const server = await TestRedisServer.start();
      const admin = server.client();
      return {
        spec: server.url,
        flush: () => admin.flushdb(),
        stop: async () => {
          admin.disconnect();
          await server.stop();
        },
      };
    },
  },
  {
    name: "Redis Cluster (Lua)",
    runs: 1000,
    start: async () => {
      const setup = await sharedCluster();
      const flush = () => onClusterMasters(setup, (admin) => admin.flushall());
      return { spec: setup.storeSpec(), flush, stop: async () => void (await flush()) };
    },
  },
];

for (const target of targets)
  describe(`Lease differential: memory (state machine) vs ${target.name}`, function () {
    this.timeout(180_000);
    let where: Awaited<ReturnType<LuaTarget["start"]>>;
    let redis: RedisLeases;
    const clock: { nowUs: number; bootUs: number; lineage: StoreLineage | undefined } = {
      nowUs: 0,
      bootUs: 0,
      lineage: undefined,
    };
    const lineage = () => clock.lineage;

    before(async function () {
      this.timeout(60_000);
      where = await target.start();
      redis = await RedisLeases.connect(where.spec, {
        virtualClock: { nowUs: () => clock.nowUs, bootUs: () => clock.bootUs, lineage },
      });
    });
    after(async () => {
      await redis?.close();
      await where?.stop();
    });

    it(`gives identical outcomes over ${target.runs.toLocaleString("en")} random sequences (seeded)`, async () => {
      let steps = 0;
      /** refusals and fences under a lineage hold: the rule must have been exercised */
      let held = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1_600_000_000_000_000, max: 1_900_000_000_000_000 }),
          // how long before the first step the store started: often within a TTL
          fc.integer({ min: 0, max: 10_000_000 }),
          fc.array(step, { minLength: 1, maxLength: 40 }),
          // a store with no lineage (the memory store's kind), or a Redis lineage from the start
          fc.boolean(),
          async (startUs, uptimeUs, sequence, withLineage) => {
            await where.flush();
            clock.nowUs = startUs;
            clock.bootUs = startUs - uptimeUs;
            clock.lineage = withLineage ? { id: "lineage0", promoted: false } : undefined;
            let lineages = 0;
            const memory = new MemoryLeases(() => clock.nowUs, clock.bootUs, lineage);
            const tokens: number[] = [];
            for (const [i, s] of sequence.entries()) {
              clock.nowUs += s.advanceMs * 1000 + (i % 3); // odd microseconds too
              if (s.kind === "lineage")
                clock.lineage = { id: `lineage${++lineages}`, promoted: s.promoted === 1 };
              const token = "token" in s ? pickToken(tokens, s.token) : 0;
              const expected = await runStep(memory, s, token);
              const actual = await runStep(redis, s, token);
              expect(actual, `step ${i} ${JSON.stringify(s)} token ${token}`).to.deep.equal(expected);
              const minted = (expected as { token?: number } | null)?.token;
              if (typeof minted === "number" && !tokens.includes(minted)) tokens.push(minted);
              if (lineages > 0 && (expected as { reason?: string } | null)?.reason === "recovering") held++;
              steps++;
            }
          },
        ),
        { numRuns: target.runs, seed: 20261129 },
      );
      expect(steps).to.be.greaterThan(target.runs * 5);
      expect(held, "steps refused under a lineage hold").to.be.greaterThan(target.runs / 20);
    });
  });
