import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { DefinitionsBackup } from "../../src/bridge/shards/definitions-backup.js";
import { StoredDefinitions } from "../../src/bridge/shards/stored-definitions.js";
import { openStore } from "../../src/store/open.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { closedLoop, printTable } from "./stats.js";

const DEFINED = Number(process.env.BENCH_DEFINITIONS ?? 3000);
const WRITES = 200;

/**
 * A shard definition written through a bridge (StoredDefinitions.put: the write, then the
 * read that puts it in force here) with DEFINED definitions in a private redis-server,
 * beside the store's floor: the write script alone. With a backup file, its text built
 * and written after each change (off the answer's path, one file write per burst).
 */
export async function definitionsBench(): Promise<void> {
  const server = await TestRedisServer.start();
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-defs-"));
  const store = await openStore(server.url);
  try {
    const plain = new StoredDefinitions(store, new ShardCatalog());
    for (let i = 0; i < DEFINED; i++)
      await store.definitions.write(`rack-${i}`, `rack-${i}`, '{"lease_ttl_ms":6000}');
    await plain.refresh();
    const floor = await closedLoop(WRITES, 1, (i) =>
      store.definitions.write(`floor-${i % 10}`, `floor-${i % 10}`, "{}"),
    );
    const put = await closedLoop(WRITES, 1, (i) =>
      plain.put(`bench-${i % 10}`, { description: `write ${i}` }),
    );
    const backedUp = new StoredDefinitions(
      store,
      new ShardCatalog(),
      new DefinitionsBackup(join(dir, "definitions.json"), server.url),
    );
    await backedUp.refresh();
    const withBackup = await closedLoop(WRITES, 1, (i) =>
      backedUp.put(`backed-${i % 10}`, { description: `write ${i}` }),
    );
    printTable(
      `Shard definition writes at ${DEFINED.toLocaleString("en-US")} definitions (one caller, ${WRITES} writes)`,
      ["what", "p50 ms", "p99 ms"],
      [
        ["the write script alone (floor)", floor.p50Ms, floor.p99Ms],
        ["put: write, then read what changed", put.p50Ms, put.p99Ms],
        ["put, with a backup file", withBackup.p50Ms, withBackup.p99Ms],
      ],
    );
  } finally {
    await store.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
