import { MemoryTraits } from "../src/traits/memory-store.js";
import { MemoryNodes } from "../src/nodes/memory.js";
import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createApp } from "../src/api/app.js";
import { processClockUs } from "../src/store/clock.js";
import { MemoryBackend } from "../src/store/memory.js";
import { ShardCatalog, ShardDefinitionError, loadShardCatalog } from "../src/shards/definitions.js";
import { Store } from "../src/store/store.js";
import { call, listen, testAuthority } from "./helpers/http.js";

describe("Shard definitions", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sb-shards-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const write = (file: string, body: unknown) =>
    writeFileSync(join(dir, file), typeof body === "string" ? body : JSON.stringify(body));

  it("loads the repository's own shards/ directory", () => {
    const catalog = loadShardCatalog(fileURLToPath(new URL("../shards", import.meta.url)));
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

  it("over HTTP: the shard's TTL applies, and an agent not listed gets 403 and nothing is written", async () => {
    const catalog = new ShardCatalog([
      { name: "rack-a", description: "", lease_ttl_ms: 15_000, agents: ["compute-0"] },
    ]);
    const backend = new MemoryBackend(processClockUs, 0);
    const { url, close } = await listen(
      createApp(new Store(backend, new MemoryNodes(), new MemoryTraits()), {
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
