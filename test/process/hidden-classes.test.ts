import { expect } from "chai";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { everyThirdIn, postWebhook, uuid } from "../helpers/http.js";
import { readExample } from "../helpers/examples.js";

/**
 * The hot paths give V8 objects of the same hidden class request after request, so its
 * inline caches hit. Three ways they did not, all found in #11: express setting its
 * prototypes on every request (src/api/http/message-classes.ts: ~100 cache misses a request,
 * 3-4x the CPU of `GET /healthz`); object literals that start with a spread and add a
 * field after it (`{ ...outcome, atUs }`), which on Node 20's V8 give every object a class
 * of its own (4 misses a renew, 3 a node list, 1 an inspector delivery); and generator
 * functions declared inside a request's code (`GET /v1/nodes`). Read from V8 itself: the bridge runs with
 * `--log-ic`, which writes a line for every inline-cache state change, and a path that
 * makes a fresh class per request shows a class never seen before, every request.
 */
const INSPECTION = readExample("inspection-result.json");

/**
 * The classes Node 20 builds for every garbage collection the bridge's metrics observe
 * (prom-client's `nodejs_gc_duration_seconds`): each GC's PerformanceEntry gets its `kind`
 * and `flags` accessors wrapped anew by `util.deprecate`, four functions of a class each. How
 * many collections fall in a measurement follows the heap and the machine's load, not the
 * path under test, so they are counted from the bridge's own GC metric and taken off.
 */
const CLASSES_PER_GC = 4;

for (const storeKind of ["memory", "redis"] as const)
  describe(`hot paths keep V8's inline caches (no hidden class per request), ${storeKind} store`, function () {
    this.timeout(90_000);
    const WARM = 200;
    const MEASURED = 300;
    let bridge: BridgeProcess;
    let redis: TestRedisServer | undefined;
    const logDir = mkdtempSync(join(tmpdir(), "sb-ic-"));
    const log = join(logDir, "v8.log");
    let agent: BridgeClient;
    let token: number;
    let keeper: NodeJS.Timeout;

    /** The garbage collections the bridge has counted so far, all kinds. */
    async function collections(): Promise<number> {
      const text = await (await fetch(`${bridge.url}/metrics`)).text();
      // No line before the first collection of a kind: none counted, none taken off.
      const counts = text.match(/^shardbridge_nodejs_gc_duration_seconds_count\{[^}]*\} \d+$/gm) ?? [];
      return counts.reduce((sum, line) => sum + Number(line.split(" ")[1]), 0);
    }

    /** The inline-cache lines V8 has written to the log so far. */
    const icLines = (): string[] => readFileSync(log, "latin1").match(/^[A-Za-z]*IC,.*$/gm) ?? [];

    /**
     * Hidden classes (maps) first seen by an inline cache per request while `request` runs
     * MEASURED times, after WARM runs to settle the caches, and the inline caches that saw
     * the most, to say where a failure comes from. A path that builds its objects on
     * classes already seen adds none; one that makes a class per object adds one or more
     * per request. (Not the count of lines: stores into objects without a prototype, like a
     * parsed query string, log a line each time on the one class all such objects share.)
     */
    async function newClassesPerRequest(
      request: () => Promise<unknown>,
    ): Promise<{ perRequest: number; top: string }> {
      for (let i = 0; i < WARM; i++) await request();
      const gcsBefore = await collections();
      const before = icLines();
      const known = new Set(before.map((line) => line.split(",")[7]));
      for (let i = 0; i < MEASURED; i++) await request();
      const measured = icLines().slice(before.length);
      const gcs = (await collections()) - gcsBefore;
      const fresh = new Set<string>();
      const sites = new Map<string, number>();
      for (const line of measured) {
        const [kind, , , row, column, , , map, property] = line.split(",");
        if (map === undefined || known.has(map) || fresh.has(map)) continue;
        fresh.add(map);
        const site = `${kind} ${row}:${column} ${property}`;
        sites.set(site, (sites.get(site) ?? 0) + 1);
      }
      const top = [...sites]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([site, n]) => `${n}× ${site}`)
        .join("; ");
      const ofRequests = Math.max(0, fresh.size - CLASSES_PER_GC * gcs);
      return { perRequest: ofRequests / MEASURED, top: `${top}; ${fresh.size} in all, ${gcs} GCs` };
    }

    before(async () => {
      if (storeKind === "redis") redis = await TestRedisServer.start();
      bridge = await startBridge({
        ...(redis && { store: redis.url }),
        shards: [{ name: "s0", lease_ttl_ms: 2000 }],
        agents: ["compute-0"],
        env: { SHARDBRIDGE_LOG_LEVEL: "warn" },
        nodeFlags: ["--log-ic", "--no-logfile-per-isolate", `--logfile=${log}`],
      });
    });

    after(async () => {
      clearInterval(keeper);
      await bridge?.stop();
      await redis?.stop();
      rmSync(logDir, { recursive: true, force: true });
    });

    it("GET /healthz, a renew, an agent's node list and an inspector delivery build no hidden class per request", async () => {
      const admin = new BridgeClient(bridge.url, bridge.tokenFor("admin"), 60_000);
      agent = new BridgeClient(bridge.url, bridge.tokenOf("compute-0"), 60_000);
      await admin.bulkUpsert(everyThirdIn("s0", 300));
      await agent.heartbeat("compute-0", ["s0"]);
      token = await acquireWhenReady(agent, "s0", "compute-0");
      const renew = () => agent.renew({ shard: "s0", agent: "compute-0", token });
      keeper = setInterval(() => void renew().catch(() => undefined), 500);

      const healthz = await newClassesPerRequest(() => fetch(`${bridge.url}/healthz`).then((r) => r.text()));
      const renews = await newClassesPerRequest(async () => expect((await renew()).ok).to.equal(true));
      const lists = await newClassesPerRequest(async () => {
        const list = await agent.nodesOf("compute-0", [token]);
        expect(list.nodes).to.have.length(100);
      });
      const page = await newClassesPerRequest(async () => {
        expect(await admin.allNodes(100)).to.have.length(300);
      });
      let finished = Date.parse("2026-12-01T00:00:00Z");
      const webhook = await newClassesPerRequest(async () => {
        finished += 1000; // each a later inspection: applied, not refused as already seen
        const sent = await postWebhook(
          bridge.url,
          {
            kind: "inspection",
            node: uuid(1),
            finished_at: new Date(finished).toISOString(),
            data: INSPECTION,
          },
          { token: bridge.tokenFor("inspector") },
        );
        expect(sent.status).to.equal(200);
      });
      // Before the fixes: 10 a /healthz, 1 a renew, 1 a node list, ~6 a listing (4 pages),
      // 1 a delivery. A few new classes turn up now and then on any path (0.03-0.1 a request
      // on Redis, from ioredis and Node's internals): a class per request is what this is after.
      expect(healthz.perRequest, `new classes per GET /healthz (${healthz.top})`).to.be.below(0.5);
      expect(renews.perRequest, `new classes per renew (${renews.top})`).to.be.below(0.5);
      expect(lists.perRequest, `new classes per node list (${lists.top})`).to.be.below(0.5);
      expect(
        page.perRequest,
        `new classes per listing of GET /v1/nodes, 100 nodes a page (${page.top})`,
      ).to.be.below(0.5);
      expect(webhook.perRequest, `new classes per inspector delivery (${webhook.top})`).to.be.below(0.5);
    });
  });
