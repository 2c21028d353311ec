import { expect } from "chai";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";

const SHARD = "rack-p";

/**
 * A standby's traffic: it asks once as it starts (answered at once, so it can say whom it
 * stands behind), then waits at the bridge (`wait_ms`) and is answered only when the lease
 * changes hands or the wait ends (30 s). docs/SCALING.md: the polls it replaces, every
 * 250-500 ms per standby, were most of a large fleet's lease load. Counted by the bridge
 * itself: every refused acquire is one shardbridge_lease_refused_total{reason="held"}.
 */
describe("a standby behind a renewing holder: how often it asks (counted by the bridge)", function () {
  this.timeout(60_000);
  let bridge: BridgeProcess;
  let holder: BridgeClient;
  let token = 0;
  let renewing: NodeJS.Timeout | undefined;

  before(async () => {
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: 3000 }],
      agents: ["host-a", "host-b"],
    });
    holder = new BridgeClient(bridge.url, bridge.tokenOf("host-a"));
    // A new store holds a shard it has no history of for one TTL: ask until granted.
    for (;;) {
      const got = await holder.acquire({ shard: SHARD, agent: "host-a" });
      if (got.ok) {
        token = got.token;
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    renewing = setInterval(() => void holder.renew({ shard: SHARD, agent: "host-a", token }), 800);
  });
  after(async () => {
    clearInterval(renewing);
    await bridge?.stop();
  });

  const refusedHeld = async () => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    const line = new RegExp(
      `^shardbridge_lease_refused_total\\{shard="${SHARD}",reason="held"\\} (\\d+)`,
      "m",
    );
    return Number(line.exec(text)?.[1] ?? 0);
  };
  /** Refused acquires while a standby runs for `ms`, from its first one on. */
  const pollsOver = async (ms: number, extra: string[]) => {
    const standby = AgentProcess.cli("host-b", [
      ...["agent", "--id", "host-b", "--shard", SHARD, "--bridge", bridge.url],
      ...["--token", bridge.tokenOf("host-b"), ...extra],
    ]);
    try {
      await standby.waitFor((e) => e.ev === "standby", 15_000);
      const before = await refusedHeld();
      await new Promise((r) => setTimeout(r, ms));
      return (await refusedHeld()) - before;
    } finally {
      await standby.kill();
    }
  };

  it("is refused once as it starts and then waits: no refused acquire in 4 s, with or without --standby-poll", async () => {
    const waiting = await pollsOver(4000, []);
    const polled = await pollsOver(4000, ["--standby-poll", "100"]);
    console.log(
      `      refused acquires in 4 s after the first: ${waiting} by default, ${polled} with --standby-poll 100`,
    );
    // Polling, it would be 8-16 (40 with a 100 ms poll).
    expect(waiting).to.equal(0);
    expect(polled).to.equal(0);
  });

  it("refuses a poll outside 50 ms .. 60 s with exit 2", async () => {
    const run = await runShardbridge([
      "agent",
      "--id",
      "host-b",
      "--shard",
      SHARD,
      "--token",
      "t",
      "--standby-poll",
      "10",
    ]);
    expect(run.status).to.equal(2);
    expect(run.stderr).to.match(/--standby-poll: must be an integer 50\.\.60000/);
  });
});
