import { expect } from "chai";
import { freePort } from "../helpers/redis-server.js";
import { spawn } from "node:child_process";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { statusTable } from "../../src/cli/status.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { SHARDBRIDGE } from "../helpers/cli.js";

/** `shardbridge status` against a real bridge: the operator's one command for who holds what. */
describe("shardbridge status", function () {
  this.timeout(60_000);
  let bridge: BridgeProcess;
  let token: number;
  let holder: BridgeClient;
  const admin = () => bridge.tokenFor("admin");

  before(async () => {
    bridge = await startBridge({
      shards: [
        { name: "rack-a", lease_ttl_ms: 6000 },
        { name: "rack-b", lease_ttl_ms: 6000 },
      ],
      agents: ["host-a", "host-b"],
    });
    const a = (holder = new BridgeClient(bridge.url, bridge.tokenOf("host-a")));
    token = await acquireWhenReady(a, "rack-a", "host-a");
    await a.heartbeat("host-a", ["rack-a"]);
    await new BridgeClient(bridge.url, bridge.tokenOf("host-b")).heartbeat("host-b", ["rack-a", "rack-b"]);
  });
  // host-a keeps its lease as an agent would (the TTL is 6 s), every 2 s, whatever the
  // tests are doing: one `shardbridge status` run takes 5 s on a loaded 2-core machine.
  let keeper: NodeJS.Timeout | undefined;
  before(() => {
    keeper = setInterval(
      () => void holder.renew({ shard: "rack-a", agent: "host-a", token }).catch(() => {}),
      2000,
    );
  });
  after(async () => {
    clearInterval(keeper);
    await bridge?.stop();
  });
  beforeEach(async () => {
    expect(await holder.renew({ shard: "rack-a", agent: "host-a", token })).to.include({ ok: true });
  });

  it("prints shards with holder, token, time left and since, and agents up with what they hold", async () => {
    const run = await runShardbridge(["status", "--bridge", bridge.url, "--token", admin()]);
    expect(run.status, run.stderr).to.equal(0);
    const lines = run.stdout.split("\n");
    expect(lines[0]).to.match(/1 of 2 shards held, 2 of 2 agents up/);
    expect(lines[1]).to.equal("Ironic delivery: not configured (no --ironic)");
    const rackA = lines.find((l) => l.startsWith("rack-a"))!;
    expect(rackA).to.match(
      new RegExp(
        `^rack-a\\s+0\\s+host-a\\s+${token}\\s+\\d\\.\\d s\\s+\\d\\d:\\d\\d:\\d\\d \\(\\d+ s ago\\)\\s+caught up$`,
      ),
    );
    expect(lines.find((l) => l.startsWith("rack-b"))).to.match(/^rack-b\s+0\s+-\s+-\s+-\s+-\s+caught up$/);
    // rack-a and rack-b carry no nodes: serving them leaves both agents in nova's legacy pool (+ring).
    expect(lines.find((l) => l.startsWith("host-a"))).to.match(
      /^host-a\s+up\s+rack-a\s+rack-a \+ring\s+\d+ s ago$/,
    );
    expect(lines.find((l) => l.startsWith("host-b"))).to.match(
      /^host-b\s+up\s+-\s+rack-a,rack-b \+ring\s+\d+ s ago$/,
    );
  });

  it("hides lease tokens from a token that is not admin, and answers JSON with --json", async () => {
    const other = await runShardbridge([
      "status",
      "--bridge",
      bridge.url,
      "--token",
      bridge.tokenOf("host-b"),
    ]);
    expect(other.status, other.stderr).to.equal(0);
    expect(other.stdout).to.include("(hidden)").and.not.include(String(token));
    const json = await runShardbridge(["status", "--bridge", bridge.url, "--token", admin(), "--json"]);
    const snapshot = JSON.parse(json.stdout) as {
      shards: Array<{ name: string; lease: { token: number } | null }>;
      ironic: unknown;
    };
    expect(snapshot.shards.find((s) => s.name === "rack-a")!.lease!.token).to.equal(token);
    expect(snapshot.ironic).to.deep.equal({ configured: false });
  });

  it("--watch redraws: one picture after another into a pipe, each with its own time", async () => {
    const child = spawn(SHARDBRIDGE.command, [
      ...SHARDBRIDGE.args,
      "status",
      "--bridge",
      bridge.url,
      "--token",
      admin(),
      "--watch",
      "1",
      "--json",
    ]);
    const lines: string[] = [];
    child.stdout.on("data", (c: Buffer) => lines.push(...c.toString().split("\n").filter(Boolean)));
    const deadline = performance.now() + 20_000;
    while (lines.length < 2 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    child.kill("SIGKILL");
    expect(lines.length).to.be.at.least(2);
    const [first, second] = lines.map((l) => JSON.parse(l) as { at: string });
    expect(Date.parse(second!.at) - Date.parse(first!.at)).to.be.within(900, 3000);
  });

  it("exits 2 without a token or with one the bridge refuses, 1 saying why when the bridge does not answer", async () => {
    const none = await runShardbridge(["status", "--bridge", bridge.url], { SHARDBRIDGE_TOKEN: "" });
    expect(none.status).to.equal(2);
    const unknown = await runShardbridge([
      "status",
      "--bridge",
      bridge.url,
      "--token",
      "not-a-token-0123456789",
    ]);
    expect(unknown.status, unknown.stderr).to.equal(2);
    expect(unknown.stderr).to.match(/^shardbridge: 401 shardbridge\.auth\.unauthenticated/);
    const port = await freePort();
    const gone = await runShardbridge(["status", "--bridge", `http://127.0.0.1:${port}`, "--token", "x"]);
    expect(gone.status).to.equal(1);
    expect(gone.stderr).to.equal(
      `shardbridge: cannot reach the server: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });
});

describe("shardbridge status: the Ironic line", () => {
  it("puts the delivery lag first, then what became of each batch", () => {
    const text = statusTable({
      at: "2026-12-01T12:00:00.000Z",
      shards: [],
      agents: [],
      down_after_ms: 30_000,
      ironic: {
        configured: true,
        durable: false,
        pending_changes: 6,
        oldest_pending_ms: 2_460,
        batches: { delivered: 3, retried: 2, given_up: 1 },
      },
    });
    expect(text.split("\n")[1]).to.equal(
      "Ironic delivery: 6 trait changes pending, the oldest 2.5 s; 3 batches delivered, 2 retried, 1 given up" +
        " (kept in the bridge's memory only)",
    );
  });
});
