import { MemoryBackend } from "../../src/store/memory.js";
import { RedisBackend } from "../../src/store/redis/backend.js";
import { Store } from "../../src/store/store.js";
import { TestRedisServer } from "./redis-server.js";

/**
 * A store backend under test: how to get a fresh store, how to make it lose every key
 * (a Redis restart without persistence, or a restarted bridge process for memory), and
 * how many keys it holds (to prove refused requests wrote nothing).
 */
export interface BackendUnderTest {
  name: "memory" | "redis";
  before(): Promise<void>;
  after(): Promise<void>;
  fresh(): Promise<Store>;
  loseEverything(store: Store): Promise<Store>;
  storedKeys(store: Store): Promise<number>;
}

export function memoryUnderTest(): BackendUnderTest {
  return {
    name: "memory",
    before: async () => undefined,
    after: async () => undefined,
    fresh: async () => new Store(new MemoryBackend()),
    loseEverything: async () => new Store(new MemoryBackend()),
    storedKeys: async (store) => {
      const backend = store.backend as MemoryBackend;
      return backend.storedShardCount() + (await backend.agents()).length;
    },
  };
}

export function redisUnderTest(): BackendUnderTest {
  let server: TestRedisServer | undefined;
  const opened: Store[] = [];
  const open = async () => {
    const store = new Store(await RedisBackend.connect(server!.url));
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
      server = await TestRedisServer.start();
    },
    after: async () => {
      await Promise.all(opened.map((s) => s.close()));
      await server?.stop();
    },
    fresh: async () => {
      await flush();
      return open();
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
  };
}

export const backendsUnderTest = (): BackendUnderTest[] => [memoryUnderTest(), redisUnderTest()];
