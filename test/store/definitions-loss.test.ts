import { expect } from "chai";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/runtime/config.js";
import type { DefinitionBackend } from "../../src/store/ports/definitions.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { DefinitionsBackup } from "../../src/bridge/shards/definitions-backup.js";
import { StoredDefinitions } from "../../src/bridge/shards/stored-definitions.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { memoryUnderTest } from "../helpers/backends.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { until } from "../helpers/until.js";

/** One bridge's view of the store's definitions: a store connection, a catalog, the kept definitions. */
interface Bridge {
  store: Store;
  catalog: ShardCatalog;
  stored: StoredDefinitions;
}

const everything = { mark: null, version: -1 };
/** A definition written with an empty body, as the store keeps it (defaults filled in). */
const DEFAULTS = '{"description":"","lease_ttl_ms":6000}';

/** What the store holds now, removed shards as null, read on a connection of its own. */
async function held(store: Store): Promise<Array<[string, string | null]>> {
  const { entries } = await store.definitions.read(everything);
  return [...entries].map(([name, e]) => [name, e.record] as [string, string | null]).sort();
}

/** A backup file's text ("" before it is first written). */
const fileText = (path: string): Promise<string> =>
  Promise.resolve(existsSync(path) ? readFileSync(path, "utf8") : "");

const shardsOf = (catalog: ShardCatalog) =>
  catalog.definitions
    .map((d) => d.name)
    .sort()
    .join(",");

/**
 * A store that came back empty (issue #45): a Redis restarted without persistence, the
 * embedded store of a restarted bridge. Each bridge notices it from the store's own
 * definitions (their mark), once, and gives back what it read before — from memory, or
 * from its backup file — the store keeping the newest entry of each shard.
 */
describe("Shard definitions when the store loses its data", function () {
  this.timeout(60_000);
  let dir: string;
  let server: TestRedisServer | undefined;
  const opened: Store[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sb-defs-loss-"));
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
    await server?.stop();
    server = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const bridgeOn = async (spec: string, backup?: string): Promise<Bridge> => {
    const store = await openStore(spec);
    opened.push(store);
    const catalog = new ShardCatalog();
    const file = backup === undefined ? undefined : new DefinitionsBackup(backup, spec);
    const stored = new StoredDefinitions(store, catalog, file);
    await stored.refresh();
    return { store, catalog, stored };
  };
  /** The bridge's next look at the store, once Redis answers again. */
  const look = (bridge: Bridge) =>
    until(
      "the store answers again",
      () =>
        bridge.stored.refresh().then(
          () => true,
          () => false,
        ),
      (ok) => ok,
      10_000,
    );

  it("redis killed -9 and restarted empty: each bridge notices once, the store takes the definitions back once, removals too", async () => {
    server = await TestRedisServer.start();
    const backup = join(dir, "one.json");
    const one = await bridgeOn(server.url, backup);
    const two = await bridgeOn(server.url);
    await one.stored.put("rack-a", { lease_ttl_ms: 3000 });
    await two.stored.put("rack-b", { agents: ["compute-0"] });
    await one.stored.put("rack-c", {});
    await two.stored.remove("rack-c");
    await one.stored.refresh();
    await two.stored.refresh();
    const before = await held(one.store);

    await server.restart();
    await look(one);
    await look(two);
    // Both noticed, once each; the store took each entry once (the second bridge found
    // nothing missing), the removal of rack-c among them.
    expect([one.stored.counts.losses, two.stored.counts.losses]).to.deep.equal([1, 1]);
    expect(one.stored.counts.restored + two.stored.counts.restored).to.equal(3);
    expect(await held(one.store)).to.deep.equal(before);
    expect(before.find(([name]) => name === "rack-c")).to.deep.equal(["rack-c", null]);
    for (const bridge of [one, two]) {
      expect(shardsOf(bridge.catalog)).to.equal("rack-a,rack-b");
      expect(bridge.catalog.get("rack-a")?.lease_ttl_ms).to.equal(3000);
    }
    // Later looks find nothing more: the loss is counted once.
    await one.stored.refresh();
    await two.stored.refresh();
    expect([one.stored.counts.losses, two.stored.counts.losses]).to.deep.equal([1, 1]);
    // The backup file follows the store: its mark is the new one.
    // The restore left a new mark (the restarted store had none).
    const { mark } = await one.store.definitions.read(everything);
    expect(mark).to.be.a("string");
    await until(
      "the backup file names the store's new mark",
      () => fileText(backup),
      (t) => t.includes(`"mark":"${mark}"`),
      5000,
    );
  });

  it("a bridge started again with a stale backup does not bring back a shard removed since", async () => {
    server = await TestRedisServer.start();
    const backup = join(dir, "a.json");
    const stale = join(dir, "a-stale.json");
    let a = await bridgeOn(server.url, backup);
    const b = await bridgeOn(server.url);
    await a.stored.put("rack-x", {});
    await a.stored.put("rack-y", {});
    await until(
      "the backup holds both",
      () => fileText(backup),
      (t) => t.includes("rack-y"),
      5000,
    );
    await a.store.close();
    copyFileSync(backup, stale);
    // Removed while bridge a is down: its file still has rack-x.
    await b.stored.remove("rack-x");

    await server.restart();
    await look(b);
    a = await bridgeOn(server.url, backup);
    expect(a.stored.counts.losses).to.equal(1);
    expect(await held(a.store)).to.deep.equal([
      ["rack-x", null],
      ["rack-y", DEFAULTS],
    ]);
    expect(shardsOf(a.catalog)).to.equal("rack-y");

    // The other order: the stale copy reaches the store first and brings rack-x back,
    // until a bridge that saw the removal gives its copy: the removal is newer and wins.
    await server.restart();
    const staleBridge = await bridgeOn(server.url, stale);
    expect(shardsOf(staleBridge.catalog)).to.equal("rack-x,rack-y");
    await look(b);
    await staleBridge.stored.refresh();
    expect(await held(b.store)).to.deep.equal([
      ["rack-x", null],
      ["rack-y", DEFAULTS],
    ]);
    expect(shardsOf(staleBridge.catalog)).to.equal("rack-y");
  });

  it("embedded store: a restarted bridge gives its backup back to the new, empty store", async () => {
    const backup = join(dir, "memory.json");
    const memory = memoryUnderTest();
    const first = await memory.fresh();
    const catalog = new ShardCatalog();
    const stored = new StoredDefinitions(first, catalog, new DefinitionsBackup(backup, "memory"));
    await stored.put("rack-m", { lease_ttl_ms: 4000, agents: ["compute-1"] });
    await stored.put("rack-n", {});
    await stored.remove("rack-n");
    await until(
      "the backup holds the removal",
      () => fileText(backup),
      (t) => /"rack-n":\{"version":\d+,"record":null\}/.test(t),
      5000,
    );

    // The process ends with its store; the next one starts empty.
    const second = await memory.loseEverything(first);
    const again = new ShardCatalog();
    const restarted = new StoredDefinitions(second, again, new DefinitionsBackup(backup, "memory"));
    // In force from the file before the store is read, then given back to the store.
    expect(again.get("rack-m")?.agents).to.deep.equal(["compute-1"]);
    await restarted.refresh();
    expect(restarted.counts).to.deep.equal({ losses: 1, restored: 2 });
    expect(await held(second)).to.deep.equal([
      ["rack-m", '{"description":"","lease_ttl_ms":4000,"agents":["compute-1"]}'],
      ["rack-n", null],
    ]);
    expect(shardsOf(again)).to.equal("rack-m");
    // Written after the restart: ranked above the copy of the process before.
    await restarted.put("rack-n", { description: "back" });
    expect(again.get("rack-n")?.description).to.equal("back");
  });

  it("the backup file: written whole and replaced by rename, owner-only; one that does not parse stops the start", async () => {
    const memory = memoryUnderTest();
    const store = await memory.fresh();
    const path = join(dir, "state", "definitions.json");
    const stored = new StoredDefinitions(store, new ShardCatalog(), new DefinitionsBackup(path, "memory"));
    await stored.refresh();
    await stored.saveBackupAtStart();
    await stored.put("rack-f", {});
    await until(
      "written",
      () => fileText(path),
      (t) => t.includes("rack-f"),
      5000,
    );
    expect(existsSync(`${path}.partial`)).to.equal(false);
    expect(statSync(path).mode & 0o777).to.equal(0o600);
    expect(JSON.parse(readFileSync(path, "utf8"))).to.deep.include({
      format: "shardbridge.definitions-backup.v1",
      store: "memory",
    });

    writeFileSync(path, '{"format":"shardbridge.definitions-backup.v1","definitions":{"bad name":{}}}');
    expect(() => new StoredDefinitions(store, new ShardCatalog(), new DefinitionsBackup(path, "memory")))
      .to.throw(ConfigError)
      .with.property("message")
      .that.matches(/--definitions-backup .*definitions\.json: .*store/);
    // A path the bridge cannot write (a file where its folder should be) stops the start too.
    const blocked = new StoredDefinitions(
      store,
      new ShardCatalog(),
      new DefinitionsBackup(join(path, "inside.json"), "memory"),
    );
    let refused: unknown;
    await blocked.saveBackupAtStart().catch((error: unknown) => (refused = error));
    expect(refused).to.be.instanceOf(ConfigError);
  });

  it("says when Redis keeps neither an append-only file nor RDB snapshots (what serve warns of at start)", async () => {
    server = await TestRedisServer.start(); // started with --save "" --appendonly no
    const store = await openStore(server.url);
    opened.push(store);
    expect(await store.definitions.volatility()).to.match(/neither an append-only file .* nor RDB snapshots/);
    const admin = server.client();
    try {
      await admin.config("SET", "save", "3600 1");
      expect(await store.definitions.volatility(), "with RDB snapshots").to.equal(null);
      await admin.config("SET", "save", "");
      await admin.config("SET", "appendonly", "yes");
      expect(await store.definitions.volatility(), "with an append-only file").to.equal(null);
    } finally {
      admin.disconnect();
    }
    expect(
      await memoryUnderTest()
        .fresh()
        .then((m) => m.definitions.volatility()),
    ).to.match(/embedded store/);
  });

  it("a write reads back only what changed, not every definition (3,000 defined)", async () => {
    server = await TestRedisServer.start();
    const bridge = await bridgeOn(server.url);
    const admin = server.client();
    const version = Date.now() * 1000;
    const args: string[] = [];
    for (let i = 0; i < 3000; i++) args.push(`rack-${i}`, JSON.stringify({ lease_ttl_ms: 6000 }));
    // As a bridge before versions per shard kept them: the records and the version only.
    await admin.hset("sb:{definitions}:records", ...args);
    await admin.set("sb:{definitions}:version", String(version));
    admin.disconnect();
    await bridge.stored.refresh();
    expect(bridge.catalog.definitions).to.have.length(3000);
    // The store's first write gives it its mark, and the bridges read it all once more.
    await bridge.stored.put("rack-first", {});

    // Count what the store answers the bridge's reads with.
    const backend: DefinitionBackend = bridge.store.definitions;
    const read = backend.read.bind(backend);
    const answered: number[] = [];
    backend.read = async (seen) => {
      const answer = await read(seen);
      answered.push(answer.entries.size);
      return answer;
    };
    await bridge.stored.put("rack-new", { description: "one more" });
    await bridge.stored.remove("rack-7");
    expect(answered).to.deep.equal([1, 1]);
    expect(bridge.catalog.definitions).to.have.length(3001);
    expect(bridge.catalog.get("rack-new")?.description).to.equal("one more");
    expect(bridge.catalog.get("rack-7")).to.equal(undefined);
  });
});
