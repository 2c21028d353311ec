import { MemoryTraits } from "../../src/store/memory/traits.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { bridgeApp } from "../helpers/app.js";
import { processClockUs } from "../../src/core/lease/clock.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import { MAX_SHARD_AGENTS } from "../../src/contracts/shards.js";
import { ShardCatalog, ShardDefinitionError, loadShardCatalog } from "../../src/bridge/shards/catalog.js";
import { Store } from "../../src/store/store.js";
import { call, listen, testAuthority, TEST_TOKENS } from "../helpers/http.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { openStore } from "../../src/store/open.js";
import { ConfigError } from "../../src/runtime/config.js";
import { DEFINITIONS_REFRESH_MS, StoredDefinitions } from "../../src/bridge/shards/stored-definitions.js";

describe("Shard definitions", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sb-shards-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const write = (file: string, body: unknown) =>
    writeFileSync(join(dir, file), typeof body === "string" ? body : JSON.stringify(body));

  it("loads the repository's own shards/ directory", () => {
    const catalog = loadShardCatalog(fileURLToPath(new URL("../../shards", import.meta.url)));
    expect(catalog.get("demo")).to.include({ name: "demo", lease_ttl_ms: 6000 });
  });

  it("loads one NAME.json per shard with defaults, ignoring other files", () => {
    write("rack-a.json", { name: "rack-a", lease_ttl_ms: 9000, agents: ["compute-0", "compute-1"] });
    write("rack-b.json", { name: "rack-b" });
    write("README.md", "# not a definition");
    const catalog = loadShardCatalog(dir);
    expect(catalog.definitions.map((d) => d.name)).to.deep.equal(["rack-a", "rack-b"]);
    expect(catalog.ttlMsFor("rack-a")).to.equal(9000);
    expect(catalog.ttlMsFor("rack-b")).to.equal(6000);
    expect(catalog.ttlMsFor("undefined-shard")).to.equal(6000);
    expect(catalog.mayServe("rack-a", "compute-1")).to.equal(true);
    expect(catalog.mayServe("rack-a", "compute-9")).to.equal(false);
    expect(catalog.mayServe("rack-b", "anyone")).to.equal(true);
  });

  it("still reads a definition with more agents than one written now may allow (an older bridge's), and keeps it closed to others", async () => {
    const agents = Array.from({ length: MAX_SHARD_AGENTS + 20 }, (_, i) => `compute-${i}`);
    write("rack-a.json", { name: "rack-a", agents });
    expect(loadShardCatalog(dir).mayServe("rack-a", "compute-110")).to.equal(true);
    expect(loadShardCatalog(dir).mayServe("rack-a", "compute-999")).to.equal(false);
    // The same schema reads what an older bridge stored.
    const store = new Store(new MemoryLeases(processClockUs), new MemoryNodes(), new MemoryTraits());
    await store.definitions.write(
      "rack-s",
      "rack-s",
      JSON.stringify({ description: "", lease_ttl_ms: 6000, agents }),
    );
    const catalog = new ShardCatalog();
    await new StoredDefinitions(store, catalog).refresh();
    expect(catalog.mayServe("rack-s", "compute-999")).to.equal(false);
    expect(catalog.get("rack-s")?.agents).to.have.length(MAX_SHARD_AGENTS + 20);
  });

  it("a file with more problems than a refusal lists: the first 50, and how many more", () => {
    write("x.json", { name: "x", agents: Array(60).fill("") });
    try {
      loadShardCatalog(dir);
    } catch (error) {
      const e = error as ShardDefinitionError;
      expect(e.issues).to.have.length(50);
      expect(e.message.endsWith("; and 10 more"), e.message).to.equal(true);
      return;
    }
    throw new Error("expected the definition to be refused");
  });

  const bad: Array<[string, string | object, string, RegExp]> = [
    ["x.json", { name: "x", lease_ttl_ms: 500 }, "lease_ttl_ms", /at least 1000/],
    ["x.json", { name: "x", agents: [] }, "agents", /at least one agent/],
    ["x.json", { name: "x", agents: ["ok", ""] }, "agents[1]", /must not be empty/],
    ["x.json", { name: "x", colour: "red" }, "(root)", /colour/],
    ["bad name.json", { name: "bad name" }, "name", /must match/],
    ["y.json", { name: "x" }, "name", /must match the file name/],
    ["x.json", "{ not json", "(file)", /not valid JSON/],
  ];
  for (const [file, body, field, reason] of bad) {
    it(`refuses ${file} ${JSON.stringify(body).slice(0, 40)}, naming the file and ${field}`, () => {
      write(file, body);
      try {
        loadShardCatalog(dir);
      } catch (error) {
        expect(error).to.be.instanceOf(ShardDefinitionError);
        const e = error as ShardDefinitionError;
        expect(e.file).to.equal(file);
        const issue = e.issues.find((i) => i.field === field);
        expect(issue, e.message).to.not.equal(undefined);
        expect(issue!.reason).to.match(reason);
        expect(e.message.startsWith(`${file}: `)).to.equal(true);
        return;
      }
      throw new Error("expected the definition to be refused");
    });
  }

  /** The refusal loading `dir` ends in: the file it names and its one issue's reason. */
  const refusalOf = (): { file: string; reason: string } => {
    try {
      loadShardCatalog(dir);
    } catch (error) {
      expect(error).to.be.instanceOf(ShardDefinitionError);
      const e = error as ShardDefinitionError;
      expect(e.issues).to.have.length(1);
      expect(e.issues[0]!.field).to.equal("(file)");
      return { file: e.file, reason: e.issues[0]!.reason };
    }
    throw new Error("expected the definitions to be refused");
  };

  it("reads a file an editor saved with a UTF-8 byte order mark, and a link to a file (a ConfigMap's)", () => {
    writeFileSync(
      join(dir, "rack-a.json"),
      `\uFEFF${JSON.stringify({ name: "rack-a", lease_ttl_ms: 9000 })}`,
    );
    const elsewhere = mkdtempSync(join(tmpdir(), "sb-shards-target-"));
    try {
      writeFileSync(join(elsewhere, "rack-b.json"), JSON.stringify({ name: "rack-b" }));
      symlinkSync(join(elsewhere, "rack-b.json"), join(dir, "rack-b.json"));
      const catalog = loadShardCatalog(dir);
      expect(catalog.definitions.map((d) => d.name)).to.deep.equal(["rack-a", "rack-b"]);
      expect(catalog.ttlMsFor("rack-a")).to.equal(9000);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it("refuses a NAME.json that is no regular file, saying what it is, without opening it", () => {
    mkdirSync(join(dir, "rack-d.json"));
    expect(refusalOf()).to.deep.equal({
      file: "rack-d.json",
      reason:
        "a directory, not a regular file: shards/ holds one regular file NAME.json per shard, or a link to one",
    });
    rmSync(join(dir, "rack-d.json"), { recursive: true });
    symlinkSync(join(dir, "gone.json.orig"), join(dir, "rack-l.json"));
    expect(refusalOf()).to.deep.equal({
      file: "rack-l.json",
      reason: `a symbolic link to ${join(dir, "gone.json.orig")}, which does not exist`,
    });
    rmSync(join(dir, "rack-l.json"));
    // Were it opened, this process would wait for a writer for ever (the CLI test runs it in a child).
    execFileSync("mkfifo", [join(dir, "rack-f.json")]);
    expect(refusalOf()).to.include({ file: "rack-f.json" });
    expect(refusalOf().reason).to.match(/^a FIFO \(named pipe\), not a regular file/);
  });

  it("refuses a shards directory that is missing or a file as configuration (exit 2)", () => {
    expect(() => loadShardCatalog(join(dir, "nowhere"))).to.throw(
      ConfigError,
      `shard definitions directory ${join(dir, "nowhere")}: not found`,
    );
    write("plain", "");
    expect(() => loadShardCatalog(join(dir, "plain"))).to.throw(
      ConfigError,
      `shard definitions directory ${join(dir, "plain")}: not a directory`,
    );
  });

  it("refuses two files naming one shard in two cases (one shard to nova and Ironic), naming the later and the earlier", () => {
    write("rack-x.json", { name: "rack-x" });
    write("RACK-X.json", { name: "RACK-X" });
    // Files load in name order: "RACK-X.json" sorts first, so "rack-x.json" is the later.
    expect(() => loadShardCatalog(dir)).to.throw(
      ShardDefinitionError,
      /^rack-x\.json: name: "rack-x" and RACK-X\.json's "RACK-X" are one shard to nova and Ironic's database/,
    );
  });

  it("over HTTP: the shard's TTL applies, and an agent not listed gets 403 and nothing is written", async () => {
    // rack-b, undefined, on a bridge that leases any name (--allow-undefined-shards): the default TTL.
    const catalog = new ShardCatalog(
      [{ name: "rack-a", description: "", lease_ttl_ms: 15_000, agents: ["compute-0"] }],
      true,
    );
    const backend = new MemoryLeases(processClockUs, 0);
    const { url, close } = await listen(
      bridgeApp(new Store(backend, new MemoryNodes(), new MemoryTraits()), {
        authority: testAuthority(),
        catalog,
      }),
    );
    try {
      const granted = await call(`${url}/v1/shards/rack-a/lease`, "POST", { agent: "compute-0" });
      expect(granted.status).to.equal(200);
      expect(granted.body.ttl_ms).to.be.within(14_000, 15_000);
      const other = await call(`${url}/v1/shards/rack-b/lease`, "POST", { agent: "compute-9" });
      expect(other.body.ttl_ms).to.equal(6000);
      const before = backend.storedShardCount();
      const refused = await call(`${url}/v1/shards/rack-a/lease`, "POST", { agent: "compute-9" });
      expect(refused.status).to.equal(403);
      expect(refused.body.errors[0].code).to.equal("shardbridge.shard.agent_not_allowed");
      expect(backend.storedShardCount()).to.equal(before);
    } finally {
      await close();
    }
  });
});

for (const backend of backendsUnderTest()) {
  describe(`Shard definitions in the store, through the API: ${backend.name}`, function () {
    const catalog = new ShardCatalog([{ name: "from-file", description: "", lease_ttl_ms: 9000 }]);
    const ctx = useApp(backend, (store) => bridgeApp(store, { authority: testAuthority(), catalog }));
    this.timeout(30_000);
    const define = (shard: string, body: unknown, token?: string) =>
      call(`${ctx.base}/v1/shard-definitions/${shard}`, "PUT", body, token);

    it("defines, replaces and removes a shard; its TTL and agents apply at once", async () => {
      const created = await define("rack-s", { lease_ttl_ms: 12_000, agents: ["compute-0"], filling: true });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(created.body).to.deep.include({
        name: "rack-s",
        description: "",
        lease_ttl_ms: 12_000,
        agents: ["compute-0"],
        filling: true,
        source: "store",
      });
      expect(created.body.takes_effect_within_ms).to.equal(DEFINITIONS_REFRESH_MS);
      const shown = (await call(`${ctx.base}/v1/shards/rack-s`, "GET")).body;
      expect(shown).to.include({ defined: true, defined_by: "store", filling: true, lease_ttl_ms: 12_000 });
      let granted = await call(`${ctx.base}/v1/shards/rack-s/lease`, "POST", { agent: "compute-0" });
      // A store that just lost every key grants no lease for one TTL (see recoveryWaitMs).
      while (granted.body.errors?.[0].code === "shardbridge.lease.recovering") {
        await new Promise((r) => setTimeout(r, granted.body.errors[0].retry_after_ms));
        granted = await call(`${ctx.base}/v1/shards/rack-s/lease`, "POST", { agent: "compute-0" });
      }
      expect(granted.body.ttl_ms).to.be.within(11_000, 12_000);
      const other = await call(`${ctx.base}/v1/shards/rack-s/lease`, "POST", { agent: "compute-1" });
      expect(other.body.errors[0].code).to.equal("shardbridge.shard.agent_not_allowed");

      const replaced = await define("rack-s", { description: "rack S" });
      expect(replaced.status).to.equal(200);
      expect(replaced.body).to.include({ lease_ttl_ms: 6000, filling: false, agents: null });
      const listed = (await call(`${ctx.base}/v1/shard-definitions`, "GET", undefined, TEST_TOKENS.inspector))
        .body;
      expect(listed.refresh_ms).to.equal(DEFINITIONS_REFRESH_MS);
      expect(listed.version).to.be.greaterThan(0);
      expect(
        listed.definitions.map((d: { name: string; source: string }) => `${d.name}:${d.source}`),
      ).to.deep.equal(["from-file:file", "rack-s:store"]);

      expect((await call(`${ctx.base}/v1/shard-definitions/rack-s`, "DELETE")).status).to.equal(204);
      const after = (await call(`${ctx.base}/v1/shard-definitions`, "GET")).body;
      expect(after.version).to.be.greaterThan(listed.version);
      expect((await call(`${ctx.base}/v1/shards/rack-s`, "GET")).body).to.include({
        defined: false,
        defined_by: null,
      });
      const again = await call(`${ctx.base}/v1/shard-definitions/rack-s`, "DELETE");
      expect(again.status).to.equal(404);
      expect(again.body.errors[0].code).to.equal("shardbridge.shard.not_defined");
    });

    it("an agent taken off the definition while it holds the lease: fence says no at once, the lease ends, a named standby is granted", async () => {
      await define("rack-r", { agents: ["compute-0", "compute-1"] });
      const acquire = async (agent: string) => {
        let granted = await call(`${ctx.base}/v1/shards/rack-r/lease`, "POST", { agent });
        while (granted.body.errors?.[0].code === "shardbridge.lease.recovering") {
          await new Promise((r) => setTimeout(r, granted.body.errors[0].retry_after_ms));
          granted = await call(`${ctx.base}/v1/shards/rack-r/lease`, "POST", { agent });
        }
        return granted;
      };
      const fence = async (token: number) =>
        (await call(`${ctx.base}/v1/shards/rack-r/fence`, "POST", { token })).body.allowed;
      const held = await acquire("compute-0");
      expect(await fence(held.body.token)).to.equal(true);

      // compute-0 removed: its fence is refused before its lease could run out, and the
      // lease is gone — compute-1, still named, is granted at once.
      await define("rack-r", { agents: ["compute-1"] });
      expect(await fence(held.body.token)).to.equal(false);
      expect((await call(`${ctx.base}/v1/shards/rack-r/lease`, "GET")).body.lease).to.equal(null);
      const next = await acquire("compute-1");
      expect(next.status).to.equal(200);
      expect(next.body.token).to.be.greaterThan(held.body.token);

      // The same by renew: compute-1 taken off too, its renew is 403 and its lease ended.
      await define("rack-r", { agents: ["compute-0"] });
      const renew = await call(`${ctx.base}/v1/shards/rack-r/lease`, "POST", {
        agent: "compute-1",
        token: next.body.token,
      });
      expect(renew.status).to.equal(403);
      expect(renew.body.errors[0].code).to.equal("shardbridge.shard.agent_not_allowed");
      expect((await call(`${ctx.base}/v1/shards/rack-r/lease`, "GET")).body.lease).to.equal(null);
      expect((await acquire("compute-0")).status).to.equal(200);
      await call(`${ctx.base}/v1/shard-definitions/rack-r`, "DELETE");
    });

    const refusals: Array<[string, string, unknown, number, string, string | undefined]> = [
      [
        "a TTL under a second",
        "rack-s",
        { lease_ttl_ms: 500 },
        400,
        "shardbridge.validation",
        "lease_ttl_ms",
      ],
      ["an empty agent list", "rack-s", { agents: [] }, 400, "shardbridge.validation", "agents"],
      [
        "two agents nova takes for one host (equal but for case)",
        "rack-s",
        { agents: ["compute-A", "compute-a"] },
        400,
        "shardbridge.validation",
        "agents[1]",
      ],
      [
        "an agent named twice",
        "rack-s",
        { agents: ["a1", "a2", "a1"] },
        400,
        "shardbridge.validation",
        "agents[2]",
      ],
      [
        "a filling that is no boolean",
        "rack-s",
        { filling: "yes" },
        400,
        "shardbridge.validation",
        "filling",
      ],
      ["a name in the body", "rack-s", { name: "rack-t" }, 400, "shardbridge.validation", "name"],
      ["an unknown field", "rack-s", { colour: "red" }, 400, "shardbridge.validation", "(root)"],
      ["a bad shard name", "bad%20name", {}, 400, "shardbridge.validation", "shard"],
      ["a body that is no object", "rack-s", "[1]", 400, "shardbridge.validation", "(body)"],
      ["a shard a file defines", "from-file", {}, 409, "shardbridge.shard.defined_by_file", "shard"],
      ["a file's shard in another case", "From-File", {}, 409, "shardbridge.shard.case_twin", "shard"],
    ];
    for (const [what, shard, body, status, code, field] of refusals) {
      it(`refuses ${what} (${status} naming ${field}) and writes nothing`, async () => {
        const before = await backend.state(ctx.store);
        const refused = await define(shard, body);
        expect(refused.status, JSON.stringify(refused.body)).to.equal(status);
        expect(refused.body.errors[0].code).to.equal(code);
        expect(refused.body.errors.map((e: { field?: string }) => e.field)).to.include(field);
        expect(await backend.state(ctx.store)).to.equal(before);
      });
    }

    it("one shard, one spelling: another case of a defined shard is refused a definition and a lease, nothing written", async () => {
      expect((await define("rack-x", {})).status).to.equal(201);
      const before = await backend.state(ctx.store);
      const redefined = await define("RACK-X", { description: "the same rack, shouted" });
      expect(redefined.status, JSON.stringify(redefined.body)).to.equal(409);
      expect(redefined.body.errors[0]).to.include({ code: "shardbridge.shard.case_twin", field: "shard" });
      expect(redefined.body.errors[0].detail).to.match(/RACK-X and defined shard rack-x .* name it rack-x/);
      // What `run --shard RACK-X` would do next: acquire, as nova's host RACK-X-ironic.
      for (const [shard, agent] of [
        ["RACK-X", "compute-0"],
        ["Rack-x", "compute-1"],
        ["FROM-FILE", "compute-0"],
      ] as const) {
        const leased = await call(`${ctx.base}/v1/shards/${shard}/lease`, "POST", { agent });
        expect(leased.status, `${shard}: ${JSON.stringify(leased.body)}`).to.equal(409);
        expect(leased.body.errors[0].code).to.equal("shardbridge.shard.case_twin");
        const waited = await call(`${ctx.base}/v1/shards/${shard}/lease`, "POST", { agent, wait_ms: 200 });
        expect(waited.body.errors[0].code, "a waiting acquire too").to.equal("shardbridge.shard.case_twin");
      }
      expect(await backend.state(ctx.store), "the refusals wrote nothing").to.equal(before);
      const names = (await call(`${ctx.base}/v1/shard-definitions`, "GET")).body.definitions.map(
        (d: { name: string }) => d.name,
      );
      expect(names).to.deep.equal(["from-file", "rack-x"]);
      // Removed, the name is free in any case again.
      expect((await call(`${ctx.base}/v1/shard-definitions/rack-x`, "DELETE")).status).to.equal(204);
      expect((await define("RACK-X", {})).status).to.equal(201);
      await call(`${ctx.base}/v1/shard-definitions/RACK-X`, "DELETE");
    });

    it("refuses a list of agents past the bound in one error, not one per agent, and writes nothing", async () => {
      const before = await backend.state(ctx.store);
      // 64 KiB of agent ids that are no strings: 32,000 of them.
      const refused = await define("rack-s", `{"agents":[${Array(32_000).fill("0").join(",")}]}`);
      expect(refused.status, JSON.stringify(refused.body).slice(0, 300)).to.equal(400);
      expect(refused.body.errors).to.deep.equal([
        {
          status: 400,
          code: "shardbridge.validation",
          title: "Invalid request",
          detail: `agents: must name at most ${MAX_SHARD_AGENTS} agents`,
          field: "agents",
        },
      ]);
      expect(await backend.state(ctx.store)).to.equal(before);
    });

    it("lets only admin write (403 for an agent) and writes nothing", async () => {
      const before = await backend.state(ctx.store);
      const refused = await define("rack-s", {}, TEST_TOKENS.agent("compute-0"));
      expect(refused.status).to.equal(403);
      expect((await call(`${ctx.base}/v1/shard-definitions/from-file`, "DELETE")).status).to.equal(409);
      expect(await backend.state(ctx.store)).to.equal(before);
    });
  });
}

describe("Shard definitions written through one bridge are in force on every bridge of the store", function () {
  this.timeout(30_000);
  let server: TestRedisServer;
  const stores: Store[] = [];
  const bridges: Array<{ url: string; close: () => Promise<void> }> = [];
  before(async () => {
    server = await TestRedisServer.start();
    for (let i = 0; i < 2; i++) {
      const store = await openStore(server.url);
      stores.push(store);
      // Each bridge its own catalog, as two `serve` processes have.
      bridges.push(
        await listen(bridgeApp(store, { authority: testAuthority(), catalog: new ShardCatalog() })),
      );
    }
  });
  after(async () => {
    for (const b of bridges) await b.close();
    for (const s of stores) await s.close();
    await server.stop();
  });

  it("two bridges defining one shard in two cases at once: one is written, the other refused naming it", async () => {
    const [one, two] = bridges.map((b) => b.url) as [string, string];
    // Neither bridge has read the other's yet: only the store's own check can refuse one.
    const answers = await Promise.all([
      call(`${one}/v1/shard-definitions/rack-twin`, "PUT", {}),
      call(`${two}/v1/shard-definitions/RACK-TWIN`, "PUT", {}),
    ]);
    expect(answers.map((a) => a.status).sort()).to.deep.equal([201, 409]);
    const written = answers.find((a) => a.status === 201)!.body.name as string;
    const refused = answers.find((a) => a.status === 409)!.body.errors[0];
    expect(refused.code).to.equal("shardbridge.shard.case_twin");
    expect(refused.detail).to.include(`name it ${written}`);
    const stored = (await stores[0]!.definitions.read({ mark: null, version: -1 })).entries;
    const live = [...stored].filter(
      ([name, entry]) => entry.record !== null && name.toLowerCase() === "rack-twin",
    );
    expect(live.map(([name]) => name)).to.deep.equal([written]);
    await call(`${one}/v1/shard-definitions/${written}`, "DELETE");
  });

  it("a store written before names were kept by case: its records are indexed at the first write, their twins refused", async () => {
    const [one] = bridges.map((b) => b.url) as [string];
    // What a bridge of the last version left: the records and the version, no names hash.
    const admin = server.client();
    try {
      await admin.hset("sb:{definitions}:records", "old-rack", '{"description":"older"}');
      expect(await admin.exists("sb:{definitions}:names")).to.equal(0);
      const twin = await call(`${one}/v1/shard-definitions/OLD-RACK`, "PUT", {});
      expect(twin.status, JSON.stringify(twin.body)).to.equal(409);
      expect(twin.body.errors[0].detail).to.include("name it old-rack");
      expect(await admin.hgetall("sb:{definitions}:names")).to.deep.equal({ "old-rack": "old-rack" });
      expect(await admin.hkeys("sb:{definitions}:records")).to.deep.equal(["old-rack"]);
    } finally {
      await admin.del("sb:{definitions}:records", "sb:{definitions}:names");
      admin.disconnect();
    }
  });

  it("within refresh_ms: the other bridge's TTL, allowed agents and filling mark follow the store", async () => {
    const [one, two] = bridges.map((b) => b.url) as [string, string];
    const put = await call(`${one}/v1/shard-definitions/rack-x`, "PUT", {
      lease_ttl_ms: 3000,
      agents: ["compute-1"],
      filling: true,
    });
    expect(put.status).to.equal(201);
    const written = performance.now();
    let seen: any;
    for (;;) {
      seen = (await call(`${two}/v1/shards/rack-x`, "GET")).body;
      if (seen.defined === true || performance.now() - written > 3 * DEFINITIONS_REFRESH_MS) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(performance.now() - written).to.be.below(3 * DEFINITIONS_REFRESH_MS);
    expect(seen).to.include({ defined_by: "store", filling: true, lease_ttl_ms: 3000 });
    const refused = await call(`${two}/v1/shards/rack-x/lease`, "POST", { agent: "compute-0" });
    expect(refused.status).to.equal(403);
    // The stored definition outlives both bridges' memory: a third bridge starts with it.
    const third = await openStore(server.url);
    stores.push(third);
    const catalog = new ShardCatalog();
    await new StoredDefinitions(third, catalog).refresh();
    expect(catalog.get("rack-x")).to.deep.include({ lease_ttl_ms: 3000, filling: true });
  });
});
