import { MemoryTraits } from "../../src/store/memory/traits.js";
import type { BridgeApp } from "../../src/api/app.js";
import { listen } from "./http.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { openStore } from "../../src/store/open.js";
import type { RedisBackendOptions } from "../../src/store/redis/leases.js";
import { processClockUs, type ClockUs } from "../../src/core/lease/clock.js";
import type { Clock } from "../../src/runtime/clock.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import { Store } from "../../src/store/store.js";
import { TestRedisServer } from "./redis-server.js";
import { ClusterSetup } from "./redis-topology.js";

/**
 * A store backend under test: how to get a fresh store, how to make it lose every key
 * (a Redis restart without persistence, or a restarted bridge process for memory), and
 * how many keys it holds (to prove refused requests wrote nothing).
 */
/** What a suite may set on a fresh store. */
export type FreshOptions = Pick<RedisBackendOptions, "ironicQueueMax">;

export interface BackendUnderTest {
  name: "memory" | "redis" | "redis-cluster";
  /** may take up to LONGEST_TEST_TTL_S + a few seconds the first time */
  before(): Promise<void>;
  after(): Promise<void>;
  /** `options`: bounds a suite sets smaller than a bridge's (Redis and memory alike) */
  fresh(options?: FreshOptions): Promise<Store>;
  loseEverything(store: Store): Promise<Store>;
  storedKeys(store: Store): Promise<number>;
  /**
   * Everything the store holds, as one deterministic string: equal before and after a
   * refused request proves the refusal wrote nothing.
   */
  state(store: Store): Promise<string>;
}

/** JSON of an object graph with its Maps and Sets spelled out (keys sorted). */
function serialize(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof Map) return { map: [...v].sort(([a], [b]) => (String(a) < String(b) ? -1 : 1)) };
    if (v instanceof Set) return { set: [...v].sort() };
    if (typeof v === "function") return undefined;
    return v;
  });
}

/** Every key of a Redis database with its type and contents, in key order. */
async function redisState(admin: ReturnType<TestRedisServer["client"]>): Promise<string> {
  const keys = (await admin.keys("*")).sort();
  const dump: Array<[string, string, unknown]> = [];
  for (const key of keys) {
    const type = await admin.type(key);
    const contents =
      type === "string"
        ? await admin.get(key)
        : type === "hash"
          ? Object.entries(await admin.hgetall(key)).sort()
          : type === "set"
            ? (await admin.smembers(key)).sort()
            : type === "zset"
              ? await admin.zrange(key, 0, -1, "WITHSCORES")
              : type === "stream"
                ? await admin.xrange(key, "-", "+")
                : type;
    dump.push([key, type, contents]);
  }
  return JSON.stringify(dump);
}

/**
 * The embedded store counting its leases on `clock` (a VirtualClock): a test that waits on
 * the same clock then sees every lease end to the millisecond, however busy the machine.
 * Its epoch is far from zero, as a real clock's is, and it started long ago (no recovery wait).
 */
export function memoryOnClock(clock: Clock): Store {
  return startedLongAgo(() => 1_800_000_000_000_000 + Math.floor(clock.now() * 1000));
}

/** The embedded store on `clockUs`, started long ago: no recovery wait (test/lease-recovery covers that). */
function startedLongAgo(clockUs: ClockUs, ironicQueueMax?: number): Store {
  return new Store(
    new MemoryLeases(clockUs, 0),
    new MemoryNodes(),
    new MemoryTraits(undefined, ironicQueueMax),
  );
}

export function memoryUnderTest(): BackendUnderTest {
  return {
    name: "memory",
    before: async () => undefined,
    after: async () => undefined,
    fresh: async (options = {}) => startedLongAgo(processClockUs, options.ironicQueueMax),
    loseEverything: async () => startedLongAgo(processClockUs),
    storedKeys: async (store) => {
      const backend = store.backend as MemoryLeases;
      const nodes = (store.nodes.backend as MemoryNodes).size();
      return backend.storedShardCount() + (await backend.agents()).length + nodes;
    },
    state: async (store) => serialize([store.backend, store.nodes.backend, store.traits, store.definitions]),
  };
}

/** The longest lease TTL the shared suites use, in seconds. */
const LONGEST_TEST_TTL_S = 10;
let shared: Promise<TestRedisServer> | undefined;

/**
 * One private redis-server for the suites that only need a clean database, started on
 * first use and old enough that no lease waits out its recovery period (a just-started
 * Redis refuses leases on unknown shards for one TTL). Stopped when the test run exits.
 */
export function sharedServer(): Promise<TestRedisServer> {
  shared ??= (async () => {
    const server = await TestRedisServer.start();
    const admin = server.client();
    for (;;) {
      const uptime = Number(/uptime_in_seconds:(\d+)/.exec(await admin.info("server"))?.[1]);
      if (uptime > LONGEST_TEST_TTL_S + 1) break; // +1: see boot_us in clock-server.lua
      await new Promise((r) => setTimeout(r, 250));
    }
    admin.disconnect();
    return server;
  })();
  return shared;
}

let sharedClusterSetup: Promise<ClusterSetup> | undefined;

/**
 * One Redis Cluster (three masters, a replica each: lease writes wait for it) for the
 * suites that must hold on Cluster too, started on first use and old enough that no
 * lease waits out a boot hold. Stopped when the test run exits. Callers flush what they
 * wrote (flushCluster).
 */
export function sharedCluster(): Promise<ClusterSetup> {
  sharedClusterSetup ??= (async () => {
    const setup = await ClusterSetup.start({ masters: 3, replicasPerMaster: 1 });
    const [first] = await setup.masters();
    const admin = setup.client(first!.port);
    for (;;) {
      const uptime = Number(/uptime_in_seconds:(\d+)/.exec(await admin.info("server"))?.[1]);
      if (uptime > LONGEST_TEST_TTL_S + 1) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    return setup;
  })();
  return sharedClusterSetup;
}

/** `each` on a plain client to every master of the cluster, in port order. */
export async function onClusterMasters<T>(
  setup: ClusterSetup,
  each: (admin: ReturnType<ClusterSetup["client"]>) => Promise<T>,
): Promise<T[]> {
  const masters = (await setup.masters()).sort((a, b) => a.port - b.port);
  return Promise.all(
    masters.map(async (m) => {
      const admin = setup.client(m.port);
      try {
        return await each(admin);
      } finally {
        admin.disconnect(); // one per call: a suite would otherwise hold hundreds open
      }
    }),
  );
}

/** Stop the shared redis-server and Cluster (once every test has run). */
export async function stopSharedServer(): Promise<void> {
  const server = shared;
  const cluster = sharedClusterSetup;
  shared = undefined;
  sharedClusterSetup = undefined;
  if (server !== undefined) await (await server).stop();
  if (cluster !== undefined) await (await cluster).stop();
}

export function redisUnderTest(): BackendUnderTest {
  let server: TestRedisServer | undefined;
  const opened: Store[] = [];
  const open = async (options: FreshOptions = {}) => {
    const store = await openStore(server!.url, options);
    opened.push(store);
    return store;
  };
  const flush = async () => {
    const admin = server!.client();
    await admin.flushall();
    admin.disconnect();
  };
  return {
    name: "redis",
    before: async () => {
      server = await sharedServer();
    },
    after: async () => {
      await Promise.all(opened.splice(0).map((s) => s.close()));
    },
    fresh: async (options) => {
      await flush();
      return open(options);
    },
    loseEverything: async (store) => {
      await flush();
      return store;
    },
    storedKeys: async () => {
      const admin = server!.client();
      const size = await admin.dbsize();
      admin.disconnect();
      return size;
    },
    state: async () => {
      const admin = server!.client();
      try {
        return await redisState(admin);
      } finally {
        admin.disconnect();
      }
    },
  };
}

export const backendsUnderTest = (): BackendUnderTest[] => [memoryUnderTest(), redisUnderTest()];

/**
 * The store on the shared Redis Cluster (sharedCluster), for the suites that must hold on
 * Cluster too; every master flushed for a fresh store.
 */
export function redisClusterUnderTest(): BackendUnderTest {
  let setup: ClusterSetup | undefined;
  const opened: Store[] = [];
  const onMasters = <T>(each: (admin: ReturnType<ClusterSetup["client"]>) => Promise<T>) =>
    onClusterMasters(setup!, each);
  const flush = () => onMasters((admin) => admin.flushall());
  return {
    name: "redis-cluster",
    before: async () => {
      setup = await sharedCluster();
    },
    after: async () => {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      await flush();
    },
    fresh: async (options) => {
      await flush();
      const store = await openStore(setup!.storeSpec(), options);
      opened.push(store);
      return store;
    },
    loseEverything: async (store) => {
      await flush();
      return store;
    },
    storedKeys: async () => (await onMasters((admin) => admin.dbsize())).reduce((a, b) => a + b, 0),
    state: async () => JSON.stringify(await onMasters((admin) => redisState(admin))),
  };
}

/**
 * Register the hooks a suite needs to run against `backend`: set it up once, a fresh
 * store before each test, tear down after. Read the store from the returned object.
 */
export function useBackend(backend: BackendUnderTest, options?: FreshOptions): { readonly store: Store } {
  const context = { store: undefined as unknown as Store };
  before(function () {
    this.timeout(30_000);
    return backend.before();
  });
  after(() => backend.after());
  beforeEach(async () => {
    context.store = await backend.fresh(options);
  });
  return context;
}

/**
 * The store's clock now, ms of the epoch (a lease read answers it). Tests bracket what the
 * store records between two readings rather than compare it with this process's
 * Date.now(): the embedded store's clock is monotonic from its start (src/core/lease/clock.ts)
 * and parts from the wall clock by as much as the wall clock is stepped.
 */
export async function storeNowMs(store: Store): Promise<number> {
  return Math.floor((await store.read("clock-reading")).atUs / 1000);
}

/** Additionally serve the fresh store over HTTP before each test. */
export function useApp(
  backend: BackendUnderTest,
  makeApp: (store: Store) => BridgeApp,
): { readonly store: Store; readonly base: string } {
  const context = useBackend(backend);
  const served = { base: "", close: async () => undefined as void };
  beforeEach(async () => {
    const { url, close } = await listen(makeApp(context.store));
    served.base = url;
    served.close = close;
  });
  afterEach(() => served.close());
  return {
    get store() {
      return context.store;
    },
    get base() {
      return served.base;
    },
  };
}
