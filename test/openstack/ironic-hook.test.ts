import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { readExample, withoutVendor } from "../helpers/examples.js";
import { bridgeTraitNames, postWebhook, TEST_WEBHOOK_SECRET } from "../helpers/http.js";
import { ironicApi, sharedCloud, type OpenStackCloud } from "../helpers/openstack/cloud.js";
import { manageableNode, playInspection, untilState } from "../helpers/openstack/inspection.js";
import { until } from "../helpers/until.js";
import { ironicAnswers, startIronic } from "../helpers/openstack/ironic.js";
import { TestDatabases } from "../helpers/openstack/mariadb.js";
import { TestVhost } from "../helpers/openstack/rabbitmq.js";
import type { Service } from "../helpers/openstack/service.js";
import { openstackVenv } from "../helpers/openstack/venv.js";
import { freePort, TestRedisServer } from "../helpers/redis-server.js";
import { parseOrThrow } from "../../src/core/validation.js";
import { IRONIC_PARTITIONS } from "../../src/store/ports/ironic-queue.js";
import {
  signedHeaders,
  SIGNATURE_WINDOW_S,
  webhookSignature,
} from "../../src/contracts/webhook-signature.js";
import { InspectionData } from "../../src/contracts/traits.js";
import { finishOrder, TraitRulesFile, desiredTraits } from "../../src/bridge/inspection/trait-rules.js";

const HOOK_SOURCE = fileURLToPath(new URL("../../ironic-hook/", import.meta.url));
const SHARD = "rack-h";
/** The hook's `[shardbridge] timeout`: what a frozen bridge may cost an inspection. */
const HOOK_TIMEOUT_S = 2;
const RULES = parseOrThrow(TraitRulesFile, readExample("trait-rules.json")).rules;
/** The example inspection, and a later one of the same node: a NIC vendor gone, booted in BIOS mode. */
const FIRST = readExample("inspection-result.json");
const SECOND = (() => {
  const data = withoutVendor(FIRST, "15b3");
  return {
    ...data,
    inventory: { ...data.inventory, boot: { ...data.inventory.boot, current_boot_mode: "bios" } },
  };
})();
const traitsOf = (data: unknown) => desiredTraits(parseOrThrow(InspectionData, data), RULES);

/**
 * The Python package in ironic-hook/, installed from the repository into a folder of the
 * test's own (the shared venv is never changed): its signing against the bridge's, then
 * loaded by a real Ironic 39 (`[inspector] hooks = $default_hooks,shardbridge`) whose
 * ramdisk the test plays through Ironic's own API, beside a real bridge.
 */
describe("the Ironic inspection hook (ironic-hook/)", function () {
  this.timeout(120_000);
  let tmp: string;
  let site: string;
  let python: string;

  before(function () {
    tmp = mkdtempSync(join(tmpdir(), "sb-hook-"));
    site = join(tmp, "site");
    const venv = openstackVenv();
    python = join(venv, "bin", "python");
    // Built from a copy (setuptools writes build/ and *.egg-info beside the sources), with
    // the venv's own setuptools (no build isolation: that would fetch one from the index, and
    // a test must not need the network once the venv is made).
    const source = join(tmp, "src");
    cpSync(HOOK_SOURCE, source, {
      recursive: true,
      filter: (path) =>
        !["build", "__pycache__", ".ruff_cache"].includes(basename(path)) && !path.endsWith(".egg-info"),
    });
    const pip = spawnSync(
      join(venv, "bin", "pip"),
      ["install", "--quiet", "--no-deps", "--no-cache-dir", "--no-build-isolation", "--target", site, source],
      { encoding: "utf8", timeout: 120_000 },
    );
    if (pip.status !== 0) throw new Error(`pip install ironic-hook: ${pip.stderr}${pip.error ?? ""}`);
  });
  after(() => {
    if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
  });

  /** Run `code` in the venv's Python with the package on its path: its JSON answer on stdout. */
  const py = (code: string): any => {
    const run = spawnSync(python, ["-c", code], {
      encoding: "utf8",
      env: { ...process.env, PYTHONPATH: site },
      timeout: 30_000,
    });
    if (run.status !== 0) throw new Error(`python: ${run.stderr}`);
    return JSON.parse(run.stdout);
  };

  it("signs as the bridge checks: the same HMAC and headers as src/contracts/webhook-signature.ts", () => {
    const cases = [
      {
        secret: "webhook-secret-for-tests",
        timestamp: "1767268800",
        delivery: "ironic-inspection.6a0e1d2c-b4a5-4697-8877-665544332211.1767268800123",
        body: '{"kind":"inspection"}',
      },
      { secret: "s", timestamp: "0", delivery: "", body: "" },
      {
        secret: "clé secrète ✓",
        timestamp: "1767268800",
        delivery: "d-1",
        body: '{"name":"nœud ☃","n":[1,2]}',
      },
    ];
    const python = py(`
import json
from shardbridge_ironic_hook.signing import signed_headers, webhook_signature
cases = json.loads(${JSON.stringify(JSON.stringify(cases))})
print(json.dumps({
    "signatures": [webhook_signature(c["secret"], c["timestamp"], c["delivery"], c["body"].encode()) for c in cases],
    "headers": signed_headers(cases[2]["secret"], cases[2]["body"].encode(), 1767268800.9, "d-1"),
}))`);
    expect(python.signatures).to.deep.equal(
      cases.map((c) => webhookSignature(c.secret, c.timestamp, c.delivery, c.body)),
    );
    const lower = Object.fromEntries(Object.entries(python.headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(lower).to.deep.equal(signedHeaders(cases[2]!.secret, cases[2]!.body, 1767268800.9, "d-1"));
  });

  it("sends the webhook's inspection body: finished_at to the ms of its stamp, the watcher's form of delivery id", () => {
    const node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123";
    const atMs = Date.now() - 1;
    const sent = py(`
import json
from shardbridge_ironic_hook.delivery import inspection_delivery
data = json.loads(${JSON.stringify(JSON.stringify(FIRST))})
i = inspection_delivery("${node}", data["inventory"], {"pci_devices": data["pci_devices"], "logs": "..."}, ${atMs})
odd = inspection_delivery("${node}", data["inventory"], {"pci_devices": "not a list"}, ${atMs})
print(json.dumps({"delivery": i.delivery, "body": json.loads(i.body), "odd": json.loads(odd.body)["data"]}))`);
    expect(sent.delivery).to.equal(`ironic-inspection.${node}.${atMs}`);
    expect(sent.body).to.deep.include({ kind: "inspection", node, data: FIRST });
    expect(finishOrder(sent.body.finished_at, Date.now() / 1000, SIGNATURE_WINDOW_S)).to.equal(atMs);
    expect(sent.body.finished_at).to.match(/Z$/);
    expect(sent.odd).to.deep.equal({ inventory: FIRST.inventory, pci_devices: [] });
  });

  describe("in a real Ironic 39 (agent inspection), beside a bridge on Redis", function () {
    this.timeout(240_000);
    const MAC = "52:54:00:00:07:00";
    let databases: TestDatabases | undefined;
    let vhost: TestVhost | undefined;
    let redis: TestRedisServer | undefined;
    let bridge: BridgeProcess | undefined;
    let ironicService: Service | undefined;
    let cloud: OpenStackCloud;
    /** this test's Ironic, and the cloud admin's token for the test's own calls */
    let ironic: Pick<OpenStackCloud, "ironic" | "ironicHeaders">;
    let ironicLog: string;
    let node: string;

    /** Ironic's nodes into the bridge, as an operator brings them: `shardbridge ironic-sync`. */
    const syncNodes = async () => {
      const sync = await runShardbridge(
        [
          ...["ironic-sync", "--ironic", ironic.ironic, "--bridge", bridge!.url],
          ...["--token", bridge!.tokenFor("admin")],
        ],
        cloud.bridgeEnv,
      );
      expect(sync.status, sync.stderr).to.equal(0);
    };

    before(async function () {
      this.timeout(180_000);
      const run = `sbt_${process.pid}_${randomBytes(3).toString("hex")}`;
      databases = new TestDatabases(run);
      vhost = TestVhost.create(run);
      redis = await TestRedisServer.start();
      const port = await freePort();
      // Behind the shared cloud's keystone: the bridge and its commands call it with the
      // shardbridge user's credentials, the test with the cloud admin's token.
      cloud = await sharedCloud();
      ironic = { ironic: `http://127.0.0.1:${port}`, ironicHeaders: cloud.ironicHeaders };
      bridge = await startBridge({
        shards: [{ name: SHARD, lease_ttl_ms: 6000 }],
        agents: ["compute-h"],
        store: redis.url,
        env: cloud.bridgeEnv,
        args: [
          ...["--ironic", ironic.ironic],
          ...["--trait-rules", fileURLToPath(new URL("../../examples/trait-rules.json", import.meta.url))],
          ...["--ownership", fileURLToPath(new URL("../../examples/ownership.json", import.meta.url))],
        ],
      });
      // As an operator would: the token and the secret in files only the conductor reads.
      writeFileSync(join(tmp, "token"), `${bridge.tokenFor("inspector")}\n`, { mode: 0o600 });
      writeFileSync(join(tmp, "secret"), `${TEST_WEBHOOK_SECRET}\n`, { mode: 0o600 });
      const dir = join(tmp, "ironic");
      ironicLog = join(dir, "ironic.log");
      ironicService = await startIronic({
        dir,
        port,
        databases,
        vhost,
        host: `${run}-conductor`,
        keystone: cloud.keystone,
        extra: {
          inspector: { hooks: "$default_hooks,shardbridge" },
          shardbridge: {
            url: bridge.url,
            token_file: join(tmp, "token"),
            secret_file: join(tmp, "secret"),
            timeout: HOOK_TIMEOUT_S,
          },
        },
        // stevedore keeps its cache of entry points under XDG_CACHE_HOME: in the test's folder.
        env: { PYTHONPATH: site, XDG_CACHE_HOME: join(tmp, "cache") },
      });
      await ironicService
        .until(async () => ironicAnswers(ironic.ironic, await cloud.ironicHeaders()), 90_000)
        .catch((error: Error) => {
          // Why Ironic could not load a hook is in its own log, which after() removes.
          const tail = existsSync(ironicLog) ? readFileSync(ironicLog, "utf8").split("\n").slice(-40) : [];
          throw new Error(`${error.message}\n--- ${ironicLog}:\n${tail.join("\n")}`);
        });
      // A fresh store lets the bridge own its delivery partitions one owner TTL after it
      // started (20 s: the recovering hold); the times measured below are a settled bridge's.
      await until(
        "the bridge owns every delivery partition",
        async () => bridge!.serve.events.filter((e) => e.ev === "ironic-partition-owned").length,
        (owned) => owned >= IRONIC_PARTITIONS,
        60_000,
      );
      node = await manageableNode(ironic, "hooked-0", MAC, SHARD);
      await syncNodes();
    });
    after(async () => {
      await ironicService?.stop();
      await bridge?.stop();
      await redis?.stop();
      databases?.drop();
      vhost?.remove();
    });

    const ironicTraits = async (uuid: string): Promise<string[]> =>
      ((await ironicApi(ironic, "GET", `/v1/nodes/${uuid}/traits`)).traits as string[]).sort();
    const same = (want: string[]) => (got: string[]) =>
      JSON.stringify(got) === JSON.stringify([...want].sort());
    /** The conductor's log: every line, and this hook's lines about `uuid`. */
    const logOf = (uuid: string) => {
      const lines = readFileSync(ironicLog, "utf8").split("\n");
      return {
        hook: lines.filter((l) => l.includes("shardbridge_ironic_hook") && l.includes(uuid)),
        lines,
      };
    };
    /** The hook's own time for its last line about `uuid`, in ms. */
    const hookMs = (uuid: string): number =>
      Number(
        /after (\d+) ms|in (\d+) ms/
          .exec(logOf(uuid).hook.at(-1) ?? "")
          ?.slice(1)
          .find(Boolean),
      );

    /** `inspection-watch --once` against this Ironic and bridge: its summary. */
    const watchOnce = async () => {
      const watch = await runShardbridge(
        [
          ...["inspection-watch", "--once", "--ironic", ironic.ironic, "--bridge", bridge!.url],
          ...["--token", bridge!.tokenFor("inspector"), "--secret", TEST_WEBHOOK_SECRET],
        ],
        cloud.bridgeEnv,
      );
      expect(watch.status, watch.stderr).to.equal(0);
      // Its log lines come first (each delivery's answer: what a failed check shows); the summary is the last line.
      const lines = watch.stdout.trim().split("\n");
      return {
        summary: JSON.parse(lines.at(-1)!) as Record<string, number>,
        log: lines.slice(0, -1).join("\n"),
      };
    };

    /** Inspect and wait for Ironic, the bridge and Ironic's traits: each step's ms after the ramdisk's callback. */
    const inspectUntilTraits = async (data: typeof FIRST) => {
      const want = traitsOf(data);
      const postedAt = await playInspection(ironic, node, MAC, data);
      const since = () => performance.now() - postedAt;
      const [inBridge, done, inIronic] = await Promise.all([
        until(
          "the traits in the bridge",
          () => bridgeTraitNames(bridge!.url, node, bridge!.tokenFor("admin")),
          same(want),
          30_000,
        ).then(since),
        untilState(ironic, node, "manageable").then(since),
        until("the traits in Ironic", () => ironicTraits(node), same(want), 30_000).then(since),
      ]);
      return { inBridge, done, inIronic, hook: hookMs(node) };
    };
    const ms = (steps: Record<string, number>) =>
      Object.entries(steps)
        .map(([k, v]) => `${k} ${v.toFixed(0)}`)
        .join(", ");

    it("posts the inspection while the conductor holds the node: the rules' traits in the bridge, then in Ironic; a second inspection supersedes the first", async () => {
      const first = await inspectUntilTraits(FIRST);
      const second = await inspectUntilTraits(SECOND);
      console.log(`      ramdisk's callback -> (ms) first inspection: ${ms(first)}; second: ${ms(second)}`);
      expect(traitsOf(SECOND)).to.not.deep.equal(traitsOf(FIRST));

      const { hook, lines } = logOf(node);
      expect(hook, "the hook's lines").to.have.length(2);
      expect(hook[0]).to.match(/delivered as ironic-inspection\.\S+ in \d+ ms, the bridge answered 200: /);
      for (const trait of traitsOf(FIRST)) expect(hook[0]).to.include(`+${trait}`);
      expect(hook[1])
        .to.include("+CUSTOM_BOOT_BIOS")
        .and.include("-CUSTOM_BOOT_UEFI")
        .and.include("-CUSTOM_DEV_VENDORID_15B3");
      // Decided while Ironic still held the node: each delivery is logged before Ironic ends that inspection.
      const ends = lines.flatMap((l, k) =>
        l.includes(`Successfully finished inspection of node ${node}`) ? [k] : [],
      );
      const delivered = hook.map((l) => lines.indexOf(l));
      expect(ends).to.have.length(2);
      expect(delivered[0]).to.be.below(ends[0]!);
      expect(delivered[1]).to.be.within(ends[0]!, ends[1]!);
    });

    it("a node the bridge does not know: its 404 is logged and the inspection ends as usual", async () => {
      const stranger = await manageableNode(ironic, "hooked-unknown", "52:54:00:00:08:00", SHARD);
      await playInspection(ironic, stranger, "52:54:00:00:08:00", FIRST);
      await untilState(ironic, stranger, "manageable");
      const [line] = logOf(stranger).hook;
      expect(line)
        .to.match(/WARNING/)
        .and.include("refused the inspection")
        .and.include("404");
      expect(line).to.include("shardbridge ironic-sync");
    });

    it("a standard trait named since Ironic 21.4's os-traits (HW_CPU_X86_AMXTILE): the bridge takes it, Ironic 39 gets it", async () => {
      const mac = "52:54:00:00:09:00";
      const amx = await manageableNode(ironic, "hooked-amx", mac, SHARD);
      await syncNodes();
      const posted = await postWebhook(
        bridge!.url,
        { kind: "deltas", node: amx, sequence: 1, deltas: ["+HW_CPU_X86_AMXTILE"] },
        { token: bridge!.tokenFor("inspector") },
      );
      expect(posted.status, JSON.stringify(posted.body)).to.equal(200);
      await until("the trait in Ironic", () => ironicTraits(amx), same(["HW_CPU_X86_AMXTILE"]), 30_000);
    });

    it("a frozen bridge (SIGSTOP) costs the inspection the hook's timeout, not the inspection", async () => {
      bridge!.serve.signal("SIGSTOP");
      let done: number;
      try {
        const postedAt = await playInspection(ironic, node, MAC, FIRST);
        await untilState(ironic, node, "manageable");
        done = performance.now() - postedAt;
      } finally {
        bridge!.serve.signal("SIGCONT");
      }
      const line = logOf(node).hook.at(-1)!;
      expect(line)
        .to.match(/WARNING/)
        .and.include(`not delivered to ${bridge!.url}`);
      expect(line).to.include(`no answer within ${HOOK_TIMEOUT_S} s`);
      expect(hookMs(node)).to.be.within(HOOK_TIMEOUT_S * 1000, HOOK_TIMEOUT_S * 1000 + 1000);
      // The request was sent whole before the hook gave up: the woken bridge may still apply it.
      const wokenApplied = await until(
        "the late delivery applied",
        () => bridgeTraitNames(bridge!.url, node, bridge!.tokenFor("admin")),
        same(traitsOf(FIRST)),
        3000,
      ).then(
        () => true,
        () => false,
      );
      // The fallback brings the result: inspection-watch reads the data Ironic kept.
      const { summary: watched } = await watchOnce();
      await until(
        "the traits in the bridge",
        () => bridgeTraitNames(bridge!.url, node, bridge!.tokenFor("admin")),
        same(traitsOf(FIRST)),
        10_000,
      );
      await until("the traits in Ironic", () => ironicTraits(node), same(traitsOf(FIRST)), 30_000);
      console.log(
        `      frozen bridge: ramdisk's callback -> manageable ${done.toFixed(0)} ms (the hook ${hookMs(node)} ms); ` +
          `the woken bridge applied the late delivery: ${wokenApplied}; then inspection-watch: ${JSON.stringify(watched)}`,
      );
    });

    it("a bridge that is down: the inspection ends at once, and the fallback brings the traits once it is back", async () => {
      // Stopped as for maintenance (SIGTERM hands its delivery partitions over at once).
      bridge!.serve.signal("SIGTERM");
      await bridge!.serve.exited();
      // Ironic's API gives inspection_finished_at to the second, and inspection-watch orders
      // and knows an inspection by it: one that finished within the same second as the
      // node's last (only a played callback is that quick; a real one boots a ramdisk) is
      // the same inspection to it, a replay. The last test's ended moments ago (CI saw it).
      const { inspection_finished_at: last } = await ironicApi(ironic, "GET", `/v1/nodes/${node}`);
      const nextSecond = typeof last === "string" ? Date.parse(last) + 1000 : 0;
      await new Promise((r) => setTimeout(r, Math.max(0, nextSecond - Date.now())));
      const postedAt = await playInspection(ironic, node, MAC, SECOND);
      await untilState(ironic, node, "manageable");
      const done = performance.now() - postedAt;
      const line = logOf(node).hook.at(-1)!;
      expect(line)
        .to.match(/WARNING/)
        .and.include("ConnectionRefusedError");
      expect(line).to.include("The inspection goes on");
      await bridge!.restart();
      const watched = await watchOnce();
      expect(watched.summary.applied, `${JSON.stringify(watched.summary)}\n${watched.log}`).to.equal(1);
      await until("the traits in Ironic", () => ironicTraits(node), same(traitsOf(SECOND)), 30_000);
      expect(await bridgeTraitNames(bridge!.url, node, bridge!.tokenFor("admin"))).to.deep.equal(
        traitsOf(SECOND),
      );
      console.log(
        `      bridge down: ramdisk's callback -> manageable ${done.toFixed(0)} ms (the hook ${hookMs(node)} ms)`,
      );
    });
  });
});
