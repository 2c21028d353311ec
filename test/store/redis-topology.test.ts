import { expect } from "chai";
import { existsSync } from "node:fs";
import { Cluster, Redis } from "ioredis";
import { ClusterSetup, SentinelSetup, type ProcessInfo } from "../helpers/redis-topology.js";

/**
 * The Sentinel and Cluster harness on real servers: ioredis finds the master through the
 * sentinels and follows a failover; a write that reached no replica is really lost when
 * the master dies (the case the lease fault tests build on); Cluster routes one hash tag
 * to one slot and survives CLUSTER FAILOVER and kill -9; stop() leaves nothing behind.
 */

/** The port of the server a client is connected to, as that server says. */
async function servingPort(client: Redis): Promise<number> {
  return Number(/tcp_port:(\d+)/.exec(await client.info("server"))?.[1]);
}

/** Every pid gone (not even a zombie) and every port refusing connections. */
async function expectNothingLeft(processes: ProcessInfo[], dir: string): Promise<void> {
  for (const { pid, port } of processes) {
    expect(pid, `pid of ${port} after stop()`).to.equal(undefined);
  }
  for (const { port } of processes) {
    const probe = new Redis(port, "127.0.0.1", { lazyConnect: true, retryStrategy: () => null });
    probe.on("error", () => undefined);
    const connected = await probe.connect().then(
      () => true,
      () => false,
    );
    probe.disconnect();
    expect(connected, `something still listens on ${port}`).to.equal(false);
  }
  expect(existsSync(dir), `${dir} after stop()`).to.equal(false);
}

function expectPidsGone(pids: number[]): void {
  for (const pid of pids) {
    // Signal 0 checks existence only; ESRCH means the process is gone and reaped.
    expect(() => process.kill(pid, 0), `pid ${pid} still exists`).to.throw(/ESRCH/);
  }
}

describe("Redis topology harness", function () {
  this.timeout(120_000);

  describe("Sentinel", () => {
    let setup: SentinelSetup;
    const clients: Array<Redis> = [];

    /** ioredis the way an application uses Sentinel: it asks the sentinels for the master. */
    function sentinelClient(options: { failoverDetector?: boolean } = {}): Redis {
      const client = new Redis({
        sentinels: setup.sentinels,
        name: setup.masterName,
        // Reconnect quickly while the sentinels still name a dead master, and keep a
        // command queued across all those attempts (ioredis gives up after 20 by
        // default: 2 s here, less than a promotion takes).
        retryStrategy: () => 100,
        sentinelRetryStrategy: () => 100,
        maxRetriesPerRequest: null,
        ...options,
      });
      client.on("error", () => undefined);
      clients.push(client);
      return client;
    }

    beforeEach(async function () {
      this.timeout(30_000);
      const startedAt = performance.now();
      // One setup per test: after a failover the sentinels will not start another of the
      // same master for 2 × failover-timeout, and each fault test wants a clean history.
      setup = await SentinelSetup.start();
      console.log(`      sentinel setup started in ${Math.round(performance.now() - startedAt)} ms`);
    });

    afterEach(async () => {
      for (const client of clients.splice(0)) client.disconnect();
      await setup.stop();
    });

    it("ioredis connects through the sentinels; a write on the master reaches every replica", async () => {
      expect(setup.storeSpec()).to.match(
        /^redis\+sentinel:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/sbmaster$/,
      );
      const master = await setup.currentMaster();
      const servers = setup.servers();
      expect(servers.map((s) => s.role).sort()).to.deep.equal(["master", "replica", "replica"]);
      expect(servers.find((s) => s.role === "master")?.port).to.equal(master.port);

      const client = sentinelClient();
      await client.set("sb:hello", "world");
      expect(await servingPort(client)).to.equal(master.port);
      expect(await setup.client(master.port).wait(2, 5000)).to.equal(2);
      for (const replica of servers.filter((s) => s.role === "replica")) {
        expect(await setup.client(replica.port).get("sb:hello"), `on replica ${replica.port}`).to.equal(
          "world",
        );
      }
    });

    it("kill -9 of the master: a replica is promoted and ioredis reconnects to it", async () => {
      const client = sentinelClient();
      await client.set("sb:before", "1");
      const old = await setup.currentMaster();
      expect(await setup.client(old.port).wait(2, 5000)).to.equal(2);
      const oldReplid = (await setup.replicationInfo(old.port)).master_replid;

      const killedAt = performance.now();
      await setup.kill(old.port);
      // Sent while the master is dead: ioredis queues it and sends it to whichever master
      // it finds after reconnecting.
      const writeDuringFailover = client.set("sb:during", "2").then(() => performance.now() - killedAt);
      const promoted = await setup.waitForNewMaster(old.port, 30_000);
      const writeMs = await writeDuringFailover;
      console.log(
        `      promotion after kill -9: ${Math.round(promoted.elapsedMs)} ms, all sentinels agree ` +
          `${Math.round(promoted.agreedMs)} ms; queued write done after ${Math.round(writeMs)} ms`,
      );

      expect(promoted.port).to.not.equal(old.port);
      expect(await servingPort(client)).to.equal(promoted.port);
      expect(await client.get("sb:before")).to.equal("1");
      expect(await client.get("sb:during")).to.equal("2");
      // A promoted replica starts a new replication history: new replid, the old one
      // kept as replid2 so the other replica can continue with a partial resync.
      const after = await setup.replicationInfo(promoted.port);
      console.log(
        `      master_replid ${oldReplid} → ${after.master_replid} (replid2 ${after.master_replid2}, ` +
          `second_repl_offset ${after.second_repl_offset})`,
      );
      expect(after.role).to.equal("master");
      expect(after.master_replid).to.not.equal(oldReplid);
      expect(after.master_replid2).to.equal(oldReplid);
      expect(setup.servers().find((s) => s.port === promoted.port)?.role).to.equal("master");

      // The old master comes back empty, as a replica of the new one, and catches up.
      await setup.restart(old.port);
      await setup.waitUntilInSync(old.port);
      expect(await setup.client(old.port).get("sb:before")).to.equal("1");
    });

    it("SENTINEL FAILOVER promotes a replica; the old master is demoted later", async () => {
      const plain = sentinelClient();
      const detecting = sentinelClient({ failoverDetector: true });
      await plain.set("sb:before", "1");
      await detecting.ping();
      const master = await setup.currentMaster();
      expect(await setup.client(master.port).wait(2, 5000)).to.equal(2);

      const { oldPort } = await setup.sentinelFailover();
      expect(oldPort).to.equal(master.port);
      const promoted = await setup.waitForNewMaster(oldPort, 30_000);
      // The old master is alive and still says master: the sentinels demote it only when
      // they next read its INFO (every 10 s for a replica). Until then a client that stayed
      // connected to it writes there, and those writes vanish with the demotion's full
      // resync. failoverDetector makes ioredis leave on the sentinels' +switch-master.
      await plain.set("sb:plain", "x");
      await detecting.set("sb:detecting", "x");
      const plainPort = await servingPort(plain);
      const detectingPort = await servingPort(detecting);
      const demotedAt = performance.now();
      await setup.waitUntilInSync(oldPort, 30_000);
      console.log(
        `      SENTINEL FAILOVER: new master after ${Math.round(promoted.elapsedMs)} ms, all sentinels agree ` +
          `${Math.round(promoted.agreedMs)} ms; old master demoted ${Math.round(performance.now() - demotedAt)} ms ` +
          `later; right after promotion ioredis wrote to the ${plainPort === oldPort ? "OLD" : "new"} master, ` +
          `with failoverDetector to the ${detectingPort === oldPort ? "OLD" : "new"} one`,
      );
      expect((await setup.replicationInfo(oldPort)).master_port).to.equal(String(promoted.port));

      // Demotion kills the old master's normal clients, which sends ioredis back to the sentinels.
      await plain.set("sb:after", "2");
      expect(await servingPort(plain)).to.equal(promoted.port);
      expect(await plain.get("sb:before")).to.equal("1");
    });

    it("a write that reached no replica is lost: freeze replicas, fill buffers, write, kill master", async () => {
      const master = await setup.currentMaster();
      const replicas = setup.servers().filter((s) => s.port !== master.port);
      const onMaster = setup.client(master.port);
      await onMaster.set("sb:acked", "1");
      expect(await onMaster.wait(replicas.length, 5000)).to.equal(replicas.length);

      const offsetAtFreeze = await setup.replicationOffset(master.port);
      const frozenAt = performance.now();
      for (const replica of replicas) setup.freeze(replica.port);
      // Without this the next write could still sit in the kernel buffers of a replica
      // connection and be applied on SIGCONT (see fillReplicationBuffers).
      const fill = await setup.fillReplicationBuffers();
      await onMaster.set("sb:lost", "1");
      const lostWriteOffset = await setup.replicationOffset(master.port);
      // Still true after the write: for each replica, megabytes of stream that precede the
      // write exist only in the master's memory, so nothing of the write left the process.
      const pending = await setup.pendingReplicationBytes();
      expect(pending).to.have.length(replicas.length);
      for (const bytes of pending) expect(bytes).to.be.at.least(1024 * 1024);
      await setup.kill(master.port);
      // Thawed at once, long before down-after: the sentinels never see the replicas down,
      // so the failover finds a good replica at its first attempt (an attempt without one
      // is aborted and not retried for 2 × failover-timeout).
      for (const replica of replicas) setup.thaw(replica.port);
      const frozenMs = performance.now() - frozenAt;

      const promoted = await setup.waitForNewMaster(master.port, 30_000);
      const promotedInfo = await setup.replicationInfo(promoted.port);
      const promotedAt = Number(promotedInfo.second_repl_offset) - 1;
      console.log(
        `      frozen ${Math.round(frozenMs)} ms; filled ${fill.bytesWritten} bytes, pending ${pending.join("/")}; ` +
          `lost write at offset ${lostWriteOffset}, promoted replica stopped at ${promotedAt} ` +
          `(${promotedAt - offsetAtFreeze} bytes written while it was frozen still reached it on SIGCONT); ` +
          `promotion ${Math.round(promoted.elapsedMs)} ms`,
      );

      const onNewMaster = setup.client(promoted.port);
      expect(await onNewMaster.get("sb:acked")).to.equal("1");
      expect(await onNewMaster.get("sb:lost")).to.equal(null);
      expect(promotedAt).to.be.below(lostWriteOffset);
      // The other replica follows the new master and does not have it either.
      const other = replicas.find((r) => r.port !== promoted.port)!;
      await setup.waitUntilInSync(other.port);
      expect((await setup.replicationInfo(other.port)).master_port).to.equal(String(promoted.port));
      expect(await setup.client(other.port).get("sb:lost")).to.equal(null);
      expect(await setup.client(other.port).get("sb:acked")).to.equal("1");
    });

    it("stop() leaves no redis-server or sentinel process behind", async () => {
      const master = await setup.currentMaster();
      setup.freeze(master.port); // a frozen process must go too
      const processes = setup.processes();
      const pids = processes.map((p) => p.pid!);
      expect(pids).to.have.length(6);
      await setup.stop();
      expectPidsGone(pids);
      await expectNothingLeft(setup.processes(), setup.dir);
    });
  });

  describe("Cluster", () => {
    let setup: ClusterSetup;
    const clients: Array<Cluster> = [];

    function clusterClient(): Cluster {
      // On loopback the nodes announce 127.0.0.1 themselves: no natMap. Reads and writes
      // go to masters (scaleReads "master", the default).
      const client = new Cluster(setup.nodes, { scaleReads: "master" });
      client.on("error", () => undefined);
      clients.push(client);
      return client;
    }

    const ownerOf = (key: string) => setup.ownerOf(key);

    beforeEach(async function () {
      this.timeout(30_000);
      const startedAt = performance.now();
      setup = await ClusterSetup.start();
      console.log(`      cluster started in ${Math.round(performance.now() - startedAt)} ms`);
    });

    afterEach(async () => {
      for (const client of clients.splice(0)) client.disconnect();
      await setup.stop();
    });

    it("ioredis Cluster connects; keys of one hash tag share a slot and one EVAL touches two", async () => {
      expect(setup.storeSpec()).to.match(/^redis\+cluster:\/\/(127\.0\.0\.1:\d+,){5}127\.0\.0\.1:\d+$/);
      const masters = await setup.masters();
      expect(masters).to.have.length(3);
      for (const master of masters) expect(master.replicaPorts).to.have.length(1);

      const cluster = clusterClient();
      await cluster.set("{x}:a", "1");
      await cluster.set("{x}:b", "2");
      const a = await ownerOf("{x}:a");
      const b = await ownerOf("{x}:b");
      expect(a.slot).to.equal(b.slot);
      expect(a.port).to.equal(b.port);
      // The keys live on that master itself, not behind a MOVED.
      expect(await setup.client(a.port).get("{x}:a")).to.equal("1");

      const script =
        "redis.call('SET', KEYS[2], redis.call('GET', KEYS[1]) .. ARGV[1]) return redis.call('GET', KEYS[2])";
      expect(await cluster.eval(script, 2, "{x}:a", "{x}:b", "!")).to.equal("1!");
      // Without a shared tag the same script is refused.
      await cluster.set("{y}:b", "3");
      const crossSlot = await cluster.eval(script, 2, "{x}:a", "{y}:b", "!").then(
        () => null,
        (error: Error) => error.message,
      );
      expect(crossSlot).to.match(/CROSSSLOT/);
    });

    it("CLUSTER FAILOVER of a replica: it owns the slots and ioredis follows", async () => {
      const cluster = clusterClient();
      await cluster.set("{x}:k", "v");
      const owner = await ownerOf("{x}:k");
      expect(await setup.client(owner.port).wait(1, 5000)).to.equal(1);
      const replicaPort = owner.replicaPorts[0]!;

      const { oldMasterPort, elapsedMs } = await setup.failover(replicaPort);
      console.log(`      CLUSTER FAILOVER done (cluster ok everywhere) after ${Math.round(elapsedMs)} ms`);
      expect(oldMasterPort).to.equal(owner.port);
      const newOwner = await ownerOf("{x}:k");
      expect(newOwner.port).to.equal(replicaPort);
      expect(newOwner.replicaPorts).to.deep.equal([oldMasterPort]);

      // ioredis still sends to the old owner first; its MOVED makes ioredis refresh slots.
      expect(await cluster.get("{x}:k")).to.equal("v");
      await cluster.set("{x}:k2", "w");
      expect(await setup.client(replicaPort).get("{x}:k2")).to.equal("w");
    });

    it("kill -9 of a master: its replica takes over after cluster-node-timeout", async () => {
      const cluster = clusterClient();
      await cluster.set("{x}:k", "v");
      const owner = await ownerOf("{x}:k");
      expect(await setup.client(owner.port).wait(1, 5000)).to.equal(1);

      const killedAt = performance.now();
      await setup.kill(owner.port);
      await setup.waitForClusterOk(30_000);
      console.log(
        `      cluster ok again after kill -9 of a master: ${Math.round(performance.now() - killedAt)} ms`,
      );
      expect((await ownerOf("{x}:k")).port).to.equal(owner.replicaPorts[0]);
      expect(await cluster.get("{x}:k")).to.equal("v");
    });

    it("stop() leaves no redis-server behind", async () => {
      setup.freeze(setup.nodes[1]!.port);
      const pids = setup.processes().map((p) => p.pid!);
      expect(pids).to.have.length(6);
      await setup.stop();
      expectPidsGone(pids);
      await expectNothingLeft(setup.processes(), setup.dir);
    });
  });
});
