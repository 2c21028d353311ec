import { expect } from "chai";
import { readFileSync } from "node:fs";
import type { Cluster, Redis } from "ioredis";
import { redisClient } from "../../src/store/redis/connect.js";
import { leaseConnectionOptions } from "../../src/store/redis/connection.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { ClusterSetup } from "../helpers/redis-topology.js";

/**
 * Write system calls this process's main thread has made so far (Linux counts write and writev
 * per thread). The main thread is where libuv writes sockets; libuv's pool threads (a file
 * write elsewhere in the run) are not counted. A signal's handler (SIGCHLD of another file's
 * child) writes to libuv's signal pipe on whatever thread it lands, so a count can still be one
 * high now and then: the exact counts below are the least of a few tries.
 */
const mainThreadIo = `/proc/self/task/${process.pid}/io`;
const writeCalls = () => Number(/^syscw: (\d+)$/m.exec(readFileSync(mainThreadIo, "utf8"))![1]);

/** The least of each count over `tries` runs of `count`: a stray write adds, it never takes away. */
const leastOf = async <T extends Record<string, number>>(
  tries: number,
  count: () => Promise<T>,
): Promise<T> => {
  let least = await count();
  for (let i = 1; i < tries; i++) {
    const next = await count();
    least = Object.fromEntries(Object.entries(least).map(([k, v]) => [k, Math.min(v, next[k]!)])) as T;
  }
  return least;
};

/**
 * The store's connection sends the commands of one event-loop turn in one write (see
 * src/store/redis/coalesce.ts): renews from many agents cost Redis one system call a turn, not
 * one each. Counted from the kernel's own tally of this process's write calls.
 */
describe("Redis commands of one event-loop turn go out in one write (real redis-server)", function () {
  this.timeout(30_000);
  let redis: TestRedisServer;
  let client: Redis;

  before(async () => {
    redis = await TestRedisServer.start();
    client = redisClient({ kind: "single", url: redis.url }, leaseConnectionOptions(2000)) as Redis;
    client.on("error", () => undefined);
    await client.connect();
  });
  after(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  const burst = async (commands: number) => {
    const before = writeCalls();
    const replies = await Promise.all(Array.from({ length: commands }, (_, i) => client.echo(`c${i}`)));
    return { writes: writeCalls() - before, replies };
  };

  it("200 commands issued in one turn: answered in order, in a handful of writes instead of 200", async () => {
    const { writes, replies } = await burst(200);
    expect(replies).to.deep.equal(Array.from({ length: 200 }, (_, i) => `c${i}`));
    // One write for the burst; the margin is for anything else this process writes meanwhile.
    expect(writes).to.be.below(10);
  });

  it("a lone command is sent within the same turn: it does not wait for another", async () => {
    const started = performance.now();
    expect(await client.ping()).to.equal("PONG");
    expect(performance.now() - started).to.be.below(1000);
  });

  it("the commands the callers of one read's replies write leave in one write once those callers have run, not at the turn's end", async () => {
    const counts = await leastOf(3, async () => {
      await Promise.all(Array.from({ length: 8 }, (_, i) => client.echo(`a${i}`)));
      // Here this test runs as a caller the read of those replies resumed.
      const before = writeCalls();
      const next = Array.from({ length: 8 }, (_, i) => client.echo(`b${i}`));
      const written = writeCalls() - before;
      // The cork's own nextTick was queued by the first echo, before this one.
      await new Promise((resolve) => process.nextTick(resolve));
      const atNextTick = writeCalls() - before;
      expect(await Promise.all(next)).to.deep.equal(Array.from({ length: 8 }, (_, i) => `b${i}`));
      return { written, atNextTick };
    });
    expect(counts).to.deep.equal({ written: 0, atNextTick: 1 });
  });

  it("commands written from anything else (here a timer) wait for the turn's end", async () => {
    const counts = await leastOf(3, async () => {
      const counted = await new Promise<{
        atNextTick: number;
        atImmediate: number;
        replies: Promise<string[]>;
      }>((resolve) =>
        setTimeout(() => {
          const before = writeCalls();
          const replies = Promise.all(Array.from({ length: 8 }, (_, i) => client.echo(`t${i}`)));
          process.nextTick(() => {
            const atNextTick = writeCalls() - before;
            setImmediate(() => resolve({ atNextTick, atImmediate: writeCalls() - before, replies }));
          });
        }, 1),
      );
      expect(await counted.replies).to.deep.equal(Array.from({ length: 8 }, (_, i) => `t${i}`));
      return { atNextTick: counted.atNextTick, atImmediate: counted.atImmediate };
    });
    expect(counts).to.deep.equal({ atNextTick: 0, atImmediate: 1 });
  });

  it("a new connection after a reconnect is coalesced too", async () => {
    await redis.restart();
    // ioredis reconnects by itself; wait until it answers again.
    for (let i = 0; ; i++) {
      try {
        await client.ping();
        break;
      } catch (error) {
        if (i > 100) throw error;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const { writes } = await burst(200);
    expect(writes).to.be.below(10);
  });
});

describe("… and on a Redis Cluster, per node connection (real cluster, 3 masters)", function () {
  this.timeout(60_000);
  let setup: ClusterSetup;
  let client: Cluster;

  before(async () => {
    setup = await ClusterSetup.start({ masters: 3, replicasPerMaster: 0 });
    client = redisClient({ kind: "cluster", nodes: setup.nodes }, leaseConnectionOptions(2000)) as Cluster;
    client.on("error", () => undefined);
    await client.connect();
  });
  after(async () => {
    client?.disconnect();
    await setup?.stop();
  });

  it("200 commands on one slot, issued in one turn, go out in a handful of writes", async () => {
    // One hash tag: one slot, one master, one connection.
    await client.set("{coalesce}:warm", "1");
    const before = writeCalls();
    const replies = await Promise.all(Array.from({ length: 200 }, () => client.incr("{coalesce}:n")));
    expect(replies).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(writeCalls() - before).to.be.below(10);
  });
});
