/**
 * README.md's five-minute tour, run as a reader runs it, so that it cannot rot: every ```bash
 * block of its "Five-minute tour" section, in order, in one bash (the variables of one block
 * are the next one's), in the repository's folder, against a bridge started with the flags
 * `make run` gives it (read from the Makefile) on a free port. The tour's own variables point
 * it there: BRIDGE (the address) and STATE (the folder of the dev tokens and the webhook
 * secret `make run` writes in .state/). Every answer the tour prints is checked.
 */
import { expect } from "chai";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseOrThrow } from "../../src/core/validation.js";
import { InspectionData } from "../../src/contracts/traits.js";
import { desiredTraits } from "../../src/bridge/inspection/trait-rules.js";
import { SHARDBRIDGE } from "../helpers/cli.js";
import { exampleInspector, readExample } from "../helpers/examples.js";
import { freePort } from "../helpers/redis-server.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NODE = "7b5b5b2a-4c53-4f6e-9a35-0d6c8e1f2a01";
const NODE2 = "7b5b5b2a-4c53-4f6e-9a35-0d6c8e1f2a02";
/** What examples/trait-rules.json makes of examples/inspection-result.json, as `+` deltas. */
const INSPECTED = desiredTraits(
  parseOrThrow(InspectionData, readExample("inspection-result.json")),
  exampleInspector().rules,
).map((trait) => `+${trait}`);

/** The ```bash blocks of README.md's "Five-minute tour" section, in order. */
function tourBlocks(readme: string): string[] {
  const start = readme.indexOf("\n## Five-minute tour\n");
  if (start < 0) throw new Error('README.md has no "## Five-minute tour" section');
  const rest = readme.slice(start + 1);
  const end = rest.indexOf("\n## ");
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```bash\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/**
 * The `serve` arguments of the Makefile's `run` recipe, with .state/ in `stateDir`, and
 * whether the recipe hands the webhook secret from .state/dev-inspector-secret.
 */
function makeRunServe(stateDir: string): string[] {
  const makefile = readFileSync(join(ROOT, "Makefile"), "utf8");
  const recipe = /^run:.*\n\t(.*)$/m.exec(makefile)?.[1];
  if (recipe === undefined) throw new Error("the Makefile has no run recipe");
  expect(recipe).to.contain('SHARDBRIDGE_INSPECTOR_SECRET="$$(cat .state/dev-inspector-secret)"');
  const command = / node dist\/cli\.js (serve .*)$/.exec(recipe)?.[1];
  if (command === undefined) throw new Error(`the run recipe starts no serve: ${recipe}`);
  return command.split(/\s+/).map((arg) => arg.replace(/^\.state\//, `${stateDir}/`));
}

async function untilHealthy(url: string, serve: ChildProcess): Promise<void> {
  const deadline = performance.now() + 45_000;
  for (;;) {
    if (serve.exitCode !== null) throw new Error(`serve exited with ${serve.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline) throw new Error("serve did not become healthy within 45 s");
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Run the bash script `file` in the repository's folder: its output, or its failure with both streams. */
function bash(file: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "bash",
      [file],
      { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000, encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`the tour failed (${error.message}):\n${stdout}\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}

describe("README.md's five-minute tour, run against a bridge started as `make run` starts it", function () {
  this.timeout(120_000);
  const MARK = "@@tour-block ";
  let stateDir: string;
  let serve: ChildProcess;
  let serveLog = "";
  let outputs: string[][];

  before(async () => {
    stateDir = mkdtempSync(join(tmpdir(), "sb-tour-"));
    // As the Makefile's .state/dev-inspector-secret rule makes it.
    const secret = randomBytes(24).toString("hex");
    writeFileSync(join(stateDir, "dev-inspector-secret"), `${secret}\n`, { mode: 0o600 });
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    serve = spawn(
      SHARDBRIDGE.command,
      [...SHARDBRIDGE.args, ...makeRunServe(stateDir), "--port", String(port)],
      {
        cwd: ROOT,
        stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, SHARDBRIDGE_INSPECTOR_SECRET: secret },
      },
    );
    // Its banner and logs, shown only when the tour fails.
    serve.stderr!.on("data", (chunk: Buffer) => (serveLog += chunk.toString()));
    try {
      await untilHealthy(url, serve);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${serveLog}`);
    }
    // A reader pastes the lease more than one TTL (6 s) after `make run` started; a bridge
    // younger than that refuses a first lease (409 lease.recovering), as the tour says.
    await new Promise((r) => setTimeout(r, 6_500));
    const blocks = tourBlocks(readFileSync(join(ROOT, "README.md"), "utf8"));
    const script = ["set -euo pipefail", ...blocks.map((block, i) => `echo '${MARK}${i}'\n${block}`)].join(
      "\n",
    );
    const file = join(stateDir, "tour.sh");
    writeFileSync(file, script);
    const out = await bash(file, {
      BRIDGE: url,
      STATE: stateDir,
      PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n[serve]\n${serveLog}`);
    });
    outputs = out
      .split(MARK)
      .slice(1)
      .map((part) =>
        part
          .split("\n")
          .slice(1)
          .filter((line) => line !== ""),
      );
    expect(outputs).to.have.length(blocks.length);
  });

  after(async () => {
    if (serve !== undefined && serve.exitCode === null) {
      serve.kill("SIGKILL");
      await new Promise((r) => serve.once("exit", r));
    }
    if (stateDir !== undefined) rmSync(stateDir, { recursive: true, force: true });
  });

  const json = (block: number, line: number): any => JSON.parse(outputs[block]![line]!);

  it("has seven blocks: setup, shard definition, nodes, heartbeat, lease, webhook, feed", () => {
    expect(outputs).to.have.length(7);
    expect(outputs[0]).to.deep.equal([]);
  });

  it("defines rack-a in the store, listed beside the file's demo", () => {
    expect(json(1, 0)).to.include({ name: "rack-a", source: "store", lease_ttl_ms: 6000 });
    expect(json(1, 0).agents).to.deep.equal(["compute-0", "compute-1"]);
    const listed = json(1, 1).definitions.map((d: any) => `${d.name}:${d.source}`);
    expect(listed).to.have.members(["demo:file", "rack-a:store"]);
  });

  it("puts a node, a bulk of two, and lists rack-a's two nodes", () => {
    expect(json(2, 0)).to.include({ uuid: NODE, shard: "rack-a" });
    expect(json(2, 1)).to.deep.equal({ created: 2, updated: 0 });
    expect(json(2, 2).nodes.map((n: any) => n.uuid)).to.deep.equal([NODE, NODE2]);
  });

  it("heartbeats compute-0 serving rack-a, listed up and out of the legacy pool", () => {
    expect(json(3, 0)).to.deep.include({ agent: "compute-0", serves: ["rack-a"] });
    const agent = json(3, 1).agents.find((a: any) => a.id === "compute-0");
    expect(agent).to.deep.include({ up: true, serves: ["rack-a"], legacy_pool: false });
  });

  it("acquires, renews, refuses the standby, fences, lists the nodes, releases, then fences the old token out", () => {
    const held = /^compute-0 holds rack-a under token (\d+)$/.exec(outputs[4]![0]!);
    expect(held, outputs[4]![0]).to.not.equal(null);
    const token = Number(held![1]);
    expect(json(4, 1)).to.include({ shard: "rack-a", holder: "compute-0", token, ttl_ms: 6000 });
    const refused = json(4, 2).errors[0];
    expect(refused).to.include({ status: 409, code: "shardbridge.lease.held" });
    expect(refused.lease).to.include({ holder: "compute-0", token: null });
    expect(json(4, 3)).to.deep.equal({ allowed: true });
    const list = json(4, 4);
    expect(list.nodes.map((n: any) => [n.uuid, n.via, n.token])).to.deep.equal([
      [NODE, "lease", token],
      [NODE2, "lease", token],
    ]);
    expect(outputs[4]![5]).to.equal("204");
    expect(json(4, 6)).to.deep.equal({ allowed: false });
    expect(outputs[4]).to.have.length(7);
  });

  it("signs an inspection the bridge applies as the trait rules say, each trait the inspector's", () => {
    expect(INSPECTED).to.include("+HW_CPU_X86_AVX2");
    expect(json(5, 0)).to.deep.equal({ node: NODE, generation: 1, applied: INSPECTED });
    expect(json(5, 1).traits).to.deep.equal(INSPECTED.map((t) => ({ name: t.slice(1), owner: "inspector" })));
  });

  it("hands the lease to compute-1, which reads the inspection from the feed, acknowledges it and releases", () => {
    const feed = json(6, 0);
    expect(feed).to.include({ shard: "rack-a", cursor: null });
    expect(feed.entries).to.have.length(1);
    expect(feed.entries[0]).to.deep.include({ node: NODE, deltas: INSPECTED });
    expect(json(6, 1)).to.deep.equal({ shard: "rack-a", cursor: feed.entries[0].id });
    expect(outputs[6]![2]).to.equal("204");
    const rackA = json(6, 3).shards.find((s: any) => s.name === "rack-a");
    expect(rackA).to.include({ count: 2, lease: null, feed_lag_ms: 0 });
  });
});
