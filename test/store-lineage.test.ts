import { expect } from "chai";
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { TestRedisServer } from "./helpers/redis-server.js";

/**
 * The lease scripts' reading of the store's lineage (store_lineage in
 * src/redis/clock-server.lua), run on real servers and compared with what INFO says: the
 * replication id, and whether the server's data continues another's (a promoted replica).
 * The script reads INFO with plain searches for speed; this is what keeps them right.
 */
describe("store lineage as the lease scripts read it (real redis-server, master and replica)", function () {
  this.timeout(30_000);
  const clock = readFileSync(new URL("../src/redis/clock-server.lua", import.meta.url), "utf8");
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
