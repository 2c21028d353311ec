import { expect } from "chai";
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { RedisLeases } from "../../src/store/redis/leases.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/**
 * The lease scripts' reading of the store's lineage (store_lineage in
 * src/store/redis/lua/clock-server.lua), run on real servers and compared with what INFO says: the
 * replication id, and whether the server's data continues another's (a promoted replica).
 * The script reads INFO with plain searches for speed; this is what keeps them right.
 */
describe("store lineage as the lease scripts read it (real redis-server, master and replica)", function () {
  this.timeout(30_000);
  const clock = readFileSync(new URL("../../src/store/redis/lua/clock-server.lua", import.meta.url), "utf8");
  const readLineage = `${clock}
local id, promoted = store_lineage()
return { id or false, promoted and 1 or 0 }`;

  let master: TestRedisServer;
  let replica: TestRedisServer;
  const clients: Redis[] = [];
  const connect = (server: TestRedisServer) => {
    const client = new Redis(server.url);
    clients.push(client);
    return client;
  };

  before(async () => {
    master = await TestRedisServer.start();
    replica = await TestRedisServer.start({ replicaOf: master.port });
  });
  after(async () => {
    for (const client of clients) client.disconnect();
    await replica?.stop();
    await master?.stop();
  });

  /** What INFO replication says, read with patterns. */
  const infoLineage = async (client: Redis) => {
    const info = await client.info("replication");
    return {
      id: /^master_replid:([0-9a-f]+)\r?$/m.exec(info)![1]!,
      second: Number(/^second_repl_offset:(-?\d+)\r?$/m.exec(info)![1]),
    };
  };
  const scriptLineage = async (client: Redis) => {
    const [id, promoted] = (await client.eval(readLineage, 0)) as [string, number];
    return { id, promoted: promoted === 1 };
  };

  it("a master that was never a replica: its replication id, not promoted", async () => {
    const client = connect(master);
    await client.set("k", "v");
    const info = await infoLineage(client);
    expect(info.second).to.equal(-1);
    expect(await scriptLineage(client)).to.deep.equal({ id: info.id, promoted: false });
  });

  it("a replica promoted: a new replication id, promoted (second_repl_offset set)", async () => {
    const client = connect(replica);
    for (let i = 0; (await client.info("replication")).includes("master_link_status:up") === false; i++) {
      if (i > 100) throw new Error("the replica never linked to its master");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const before = (await infoLineage(connect(master))).id;
    await client.replicaof("NO", "ONE");
    const info = await infoLineage(client);
    expect(info.id).to.not.equal(before);
    expect(info.second).to.be.at.least(0);
    expect(await scriptLineage(client)).to.deep.equal({ id: info.id, promoted: true });
  });

  it("a restarted master (no persistence): a new replication id, not promoted", async () => {
    const before = (await infoLineage(connect(master))).id;
    await master.restart();
    const client = connect(master);
    const info = await infoLineage(client);
    expect(info.id).to.not.equal(before);
    expect(await scriptLineage(client)).to.deep.equal({ id: info.id, promoted: false });
  });
});

/**
 * The lineage a connection keeps between lease scripts (src/store/redis/lineage.ts, store_lineage
 * in clock-server.lua): renews that find their shard under the kept lineage read no INFO,
 * and no role change lets a server grant or renew before its hold. The connection stays
 * open across REPLICAOF (Redis closes no client for it): what catches the change is that
 * a replica refuses every lease script, which drops the kept reading.
 */
describe("the lineage a connection keeps (real redis-server: REPLICAOF NO ONE, a demoted master, a restart)", function () {
  this.timeout(60_000);
  const TTL_MS = 2000;
  const servers: TestRedisServer[] = [];
  const backends: RedisLeases[] = [];
  const admins: Redis[] = [];
  const start = async (replicaOf?: number) => {
    const server = await TestRedisServer.start(replicaOf === undefined ? {} : { replicaOf });
    servers.push(server);
    return server;
  };
  const admin = (server: TestRedisServer) => {
    const client = server.client();
    admins.push(client);
    return client;
  };
  const backendOn = async (server: TestRedisServer) => {
    const backend = await RedisLeases.connect(server.url);
    backends.push(backend);
    return backend;
  };
  /** INFO calls the server has run (commandstats counts this read's own INFO only at the next). */
  const infoCalls = async (client: Redis) =>
    Number(/cmdstat_info:calls=(\d+)/.exec(await client.info("commandstats"))?.[1] ?? 0);
  const linked = async (client: Redis) => {
    for (let i = 0; !(await client.info("replication")).includes("master_link_status:up"); i++) {
      if (i > 100) throw new Error("the replica never linked to its master");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  /** The backend's connection id: the same before and after shows the connection stayed open. */
  const connectionId = (backend: RedisLeases) => (backend as unknown as { redis: Redis }).redis.client("ID");

  afterEach(async () => {
    for (const backend of backends.splice(0)) await backend.close();
    for (const client of admins.splice(0)) client.disconnect();
    for (const server of servers.splice(0)) await server.stop();
  });

  it("renews under the kept lineage read no INFO; one older than the trust window is read again", async () => {
    const master = await start();
    const backend = await backendOn(master);
    const token = await acquireWhenReady(backend, "kept", "a");
    const inspect = admin(master);
    const before = await infoCalls(inspect);
    for (let i = 0; i < 200; i++) {
      const renewed = await backend.renew({ shard: "kept", agent: "a", token, ttlMs: TTL_MS });
      expect(renewed.ok).to.equal(true);
    }
    // One INFO: the read of `before` itself.
    expect((await infoCalls(inspect)) - before).to.equal(1);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const after = await infoCalls(inspect);
    expect((await backend.renew({ shard: "kept", agent: "a", token, ttlMs: TTL_MS })).ok).to.equal(true);
    expect((await infoCalls(inspect)) - after).to.equal(2);
  });

  it("a demoted master refuses every lease script; promoted again, it holds the shard for a TTL though the connection stayed open", async () => {
    const master = await start();
    const replica = await start(master.port);
    const backend = await backendOn(master);
    const onReplica = admin(replica);
    const onMaster = admin(master);
    await linked(onReplica);
    const id = await connectionId(backend);
    const token = await acquireWhenReady(backend, "flip", "a");
    // The last renew the connection confirmed is a few ms before the flips: its reading is
    // within the trust window throughout.
    expect((await backend.renew({ shard: "flip", agent: "a", token, ttlMs: TTL_MS })).ok).to.equal(true);

    // Demoted: the other server promoted, this one its replica.
    await onReplica.replicaof("NO", "ONE");
    await onMaster.replicaof("127.0.0.1", String(replica.port));
    const refused = await backend.renew({ shard: "flip", agent: "a", token, ttlMs: TTL_MS }).then(
      () => null,
      (error: Error) => error,
    );
    expect(String(refused)).to.match(/READONLY/);
    const acquired = await backend.acquire({ shard: "flip", agent: "b", ttlMs: TTL_MS }).then(
      () => null,
      (error: Error) => error,
    );
    expect(String(acquired)).to.match(/READONLY/);

    // Promoted again, well within the trust window of the last renew it confirmed.
    await onMaster.replicaof("NO", "ONE");
    expect(await connectionId(backend)).to.equal(id);
    const renewed = await backend.renew({ shard: "flip", agent: "a", token, ttlMs: TTL_MS });
    expect(renewed).to.include({ ok: false, reason: "recovering" });
    const other = await backend.acquire({ shard: "flip", agent: "b", ttlMs: TTL_MS });
    expect(other).to.include({ ok: false, reason: "recovering" });
    expect((other as { retryAfterMs: number }).retryAfterMs).to.be.greaterThan(TTL_MS / 2);
  });

  it("a replica the client is connected to refuses lease scripts; after REPLICAOF NO ONE it holds every shard its master wrote", async () => {
    const master = await start();
    const replica = await start(master.port);
    const onMaster = await backendOn(master);
    const token = await acquireWhenReady(onMaster, "promoted", "a");
    expect((await onMaster.renew({ shard: "promoted", agent: "a", token, ttlMs: TTL_MS })).ok).to.equal(true);
    await linked(admin(replica));
    await new Promise((resolve) => setTimeout(resolve, 200)); // the renew reaches the replica
    const onReplica = await backendOn(replica);
    const id = await connectionId(onReplica);
    const refused = await onReplica.acquire({ shard: "promoted", agent: "b", ttlMs: TTL_MS }).then(
      () => null,
      (error: Error) => error,
    );
    expect(String(refused)).to.match(/READONLY/);

    await admin(replica).replicaof("NO", "ONE");
    expect(await connectionId(onReplica)).to.equal(id);
    const renewed = await onReplica.renew({ shard: "promoted", agent: "a", token, ttlMs: TTL_MS });
    expect(renewed).to.include({ ok: false, reason: "recovering" });
    const fenced = await onReplica.fence({ shard: "promoted", token });
    expect(fenced).to.include({ allowed: false, reason: "recovering" });
  });

  it("a restarted server: the connection is new, the readings gone, and nothing is granted before its wait", async () => {
    const master = await start();
    const backend = await backendOn(master);
    const token = await acquireWhenReady(backend, "restart", "a");
    expect((await backend.renew({ shard: "restart", agent: "a", token, ttlMs: TTL_MS })).ok).to.equal(true);
    let connects = 0;
    (backend as unknown as { redis: Redis }).redis.on("ready", () => connects++);
    await master.restart();
    for (let i = 0; ; i++) {
      const renewed = await backend
        .renew({ shard: "restart", agent: "a", token, ttlMs: TTL_MS })
        .catch(() => null);
      if (renewed !== null) {
        expect(renewed.ok).to.equal(false);
        break;
      }
      if (i > 100) throw new Error("the backend never reconnected");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(connects).to.equal(1);
    const other = await backend.acquire({ shard: "restart", agent: "b", ttlMs: TTL_MS });
    expect(other).to.include({ ok: false, reason: "recovering" });
  });
});
