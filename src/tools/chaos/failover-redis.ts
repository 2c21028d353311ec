import { setTimeout as sleep } from "node:timers/promises";
import { Forwarder } from "./forwarder.js";
import { PrivateRedisServer } from "./redis-server.js";

/** Keys of the harness's own: a write the promoted server must have, and one it must lack. */
const WRITTEN_BEFORE = "chaos:written-before-the-replica-stopped";
const WRITTEN_AFTER = "chaos:written-after-the-replica-stopped";
const SYNCED = "chaos:replica-synced";
const SYNC_TIMEOUT_MS = 10_000;

/**
 * Redis that fails over, for `chaos`: a master, a replica that follows it, and a
 * forwarder whose port is the one address the bridge is given. A failover is what the
 * simulator's `redis-failover` models: the replica stops following the master `lag`
 * before it (REPLICAOF NO ONE: from then on it lacks every write the master takes — the
 * writes of the last `lag`), the master is killed -9, and `down` later the forwarder
 * leads to the replica, now a master under a new replication id. The bridge sees one
 * Redis whose data went back `lag` and whose INFO says "promoted": what a failover to a
 * lagging replica looks like behind a virtual IP, or a proxy that follows the master.
 *
 * Why not Sentinel here (test/process/redis-ha.test.ts runs real Sentinel failovers): on Sentinel
 * the bridge confirms every lease write with WAIT 1, so a replica that stops following
 * makes lease writes fail at once, and after the failover, with no replica left, all of
 * them — the simulator's store has no WAIT, and the two would not be playing the same
 * scenario. And Sentinel promotes the replica that is most up to date: a lag of a chosen
 * length on loopback, where replication takes well under a millisecond, can only be made
 * by stopping the replica at a chosen moment, which is what this does. The harness then
 * checks it on the promoted server: a write made before the replica stopped is there, one
 * made after is not.
 */
export class FailoverRedis {
  private constructor(
    private master: PrivateRedisServer,
    private replica: PrivateRedisServer,
    private readonly forwarder: Forwarder,
  ) {}

  static async start(): Promise<FailoverRedis> {
    const master = await PrivateRedisServer.start();
    const replica = await PrivateRedisServer.start({ replicaOf: master.port });
    await writeInSync(master, SYNCED);
    return new FailoverRedis(master, replica, await Forwarder.start(master.port));
  }

  /** The address the bridge is given. */
  get url(): string {
    return `redis://127.0.0.1:${this.forwarder.port}/0`;
  }

  /** The replica stops following the master: the lag starts. */
  async replicaStops(): Promise<void> {
    await writeInSync(this.master, WRITTEN_BEFORE);
    const master = this.master.client();
    const replica = this.replica.client();
    try {
      await replica.call("REPLICAOF", "NO", "ONE");
      await master.set(WRITTEN_AFTER, "1");
    } finally {
      master.disconnect();
      replica.disconnect();
    }
  }

  /**
   * The master killed -9; `downMs` later the forwarder leads to the replica. Answers
   * whether the promoted server has the write made before the replica stopped and lacks
   * the one made after: the lag really was there. A new replica then follows the promoted
   * server, for a next failover.
   */
  async failover(downMs: number): Promise<boolean> {
    this.forwarder.moveTo(null);
    await this.master.kill();
    await sleep(downMs);
    this.forwarder.moveTo(this.replica.port);
    const promoted = this.replica.client();
    let lagged: boolean;
    try {
      const [before, after] = await Promise.all([
        promoted.exists(WRITTEN_BEFORE),
        promoted.exists(WRITTEN_AFTER),
      ]);
      lagged = before === 1 && after === 0;
      await promoted.del(WRITTEN_BEFORE);
    } finally {
      promoted.disconnect();
    }
    await this.master.stop();
    this.master = this.replica;
    this.replica = await PrivateRedisServer.start({ replicaOf: this.master.port });
    await writeInSync(this.master, SYNCED);
    return lagged;
  }

  /** Redis killed -9 without persistence (`redis-restart`): the master; its replica then follows an empty one. */
  kill(): Promise<void> {
    return this.master.kill();
  }

  restart(): Promise<void> {
    return this.master.restart();
  }

  async stop(): Promise<void> {
    await this.forwarder.close();
    await Promise.all([this.master.stop(), this.replica.stop()]);
  }
}

/**
 * Write `key` on the master and wait until a replica has it, and so everything the master
 * took before (WAIT counts the writes of the connection it is sent on).
 */
async function writeInSync(master: PrivateRedisServer, key: string): Promise<void> {
  const client = master.client();
  try {
    await client.set(key, "1");
    for (const deadline = Date.now() + SYNC_TIMEOUT_MS; ;) {
      if ((await client.wait(1, 100)) >= 1) return;
      if (Date.now() > deadline)
        throw new Error(`chaos: the replica of the redis-server on ${master.port} did not catch up`);
    }
  } finally {
    client.disconnect();
  }
}
