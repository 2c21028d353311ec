import { setTimeout as sleep } from "node:timers/promises";
import type { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { startCloud, type OpenStackCloud } from "../helpers/openstack/cloud.js";
import { enrollAvailable } from "../helpers/openstack/nodes.js";
import { NO_FUZZY_DELAY, superviseNovaCompute } from "../helpers/openstack/nova-compute.js";
import { readNovaLog, reportedAllAt } from "../helpers/openstack/nova-log.js";
import { percentile, printTable } from "./stats.js";

const SHARD = "rack-fence";
const TTL_MS = 2000;
const NODES = Number(process.env.BENCH_NOVA_NODES ?? 200);
/** Rounds of each way, alternating: fenced, direct, fenced, … */
const ROUNDS = Number(process.env.BENCH_NOVA_FENCE_ROUNDS ?? 3);
/** A deadline that says "never" for one start-up, not a measure. */
const START_DEADLINE_MS = 300_000;

type Way = "fenced" | "direct";

/**
 * Issue #46's row on the fence's cost to nova: nova-compute 34's start-up (its process
 * started to every node of a NODES-node shard reported, nova's own log) with its Ironic
 * calls through the bridge's fenced endpoint, and with them straight to Ironic, the two
 * ways alternating on one cloud (Ironic 39, placement 16, nova-conductor, keystone 30) so
 * the machine's pace falls on both alike. Each round one `run` on its own: fenced, on a
 * bridge fronting Ironic (`serve --ironic`); direct, on a bridge that fronts none, with
 * `run --unfenced` and nova-compute given Ironic's URL itself. Stopped (SIGTERM, nova's
 * graceful exit) before the next, so each start is the steady one, records already there.
 */
export async function novaFenceBench(): Promise<void> {
  let cloud: OpenStackCloud | null = null;
  const bridges: BridgeProcess[] = [];
  const started: AgentProcess[] = [];
  const times: Record<Way, number[]> = { fenced: [], direct: [] };
  try {
    const setupAt = performance.now();
    cloud = await startCloud();
    const c = cloud;
    const nodes = await enrollAvailable(
      c,
      Array.from({ length: NODES }, (_, k) => `fence-${k}`),
      SHARD,
    );
    const bridgeFor = async (way: Way) => {
      const b = await startBridge({
        shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
        agents: ["host-a"],
        env: c.bridgeEnv,
        args: way === "fenced" ? ["--ironic", c.ironic] : [],
      });
      bridges.push(b);
      const sync = await runShardbridge(
        ["ironic-sync", "--ironic", c.ironic, "--bridge", b.url, "--token", b.tokenFor("admin")],
        c.bridgeEnv,
      );
      if (sync.status !== 0) throw new Error(`ironic-sync: ${sync.stderr}`);
      return b;
    };
    const bridge: Record<Way, BridgeProcess> = {
      fenced: await bridgeFor("fenced"),
      direct: await bridgeFor("direct"),
    };
    process.stdout.write(
      `nova fence bench: cloud, ${NODES} nodes and two bridges ready in ${((performance.now() - setupAt) / 1000).toFixed(0)} s\n`,
    );

    /** One start of nova-compute the given way, to every node reported: its start-up in ms. */
    const startUp = async (way: Way): Promise<number> => {
      const s =
        way === "fenced"
          ? superviseNovaCompute(c, bridge.fenced, "host-a", SHARD, NO_FUZZY_DELAY)
          : superviseNovaCompute(
              c,
              bridge.direct,
              "host-a",
              SHARD,
              { ...NO_FUZZY_DELAY, OS_IRONIC__ENDPOINT_OVERRIDE: c.ironic },
              ["--unfenced"],
            );
      started.push(s);
      const child = await s.waitFor((e) => e.ev === "child-started", 30_000);
      const startedAt = Date.now() - (performance.now() - child.seenAt);
      const pid = Number(child.pid);
      let reportedAt: number | null = null;
      for (const deadline = performance.now() + START_DEADLINE_MS; reportedAt === null; await sleep(200)) {
        reportedAt = reportedAllAt(readNovaLog(c.novaComputeLog), pid, nodes, startedAt);
        if (reportedAt === null && performance.now() > deadline)
          throw new Error(`${way}: nova-compute ${pid} did not report every node in ${START_DEADLINE_MS} ms`);
      }
      s.signal("SIGTERM");
      await s.exited();
      return reportedAt - startedAt;
    };

    // A first start makes the compute node records: not a round.
    await startUp("fenced");
    for (let round = 0; round < ROUNDS; round++)
      for (const way of ["fenced", "direct"] as const) {
        const ms = await startUp(way);
        times[way].push(ms);
        process.stdout.write(
          `nova fence bench: round ${round + 1}, ${way}: every node reported ${Math.round(ms)} ms after the start\n`,
        );
      }
  } finally {
    for (const s of started) await s.kill().catch(() => undefined);
    for (const b of bridges) await b.stop();
    await cloud?.stop();
  }
  const median = (ms: number[]) =>
    percentile(
      [...ms].sort((a, b) => a - b),
      50,
    );
  const row = (label: string, ms: number[]) => [
    label,
    String(ms.length),
    median(ms).toFixed(0),
    Math.max(...ms).toFixed(0),
  ];
  printTable(
    `nova-compute 34's start-up, ${NODES} nodes in the shard: its Ironic calls through the fenced endpoint and direct, alternating`,
    ["nova-compute started to every node reported", "rounds", "median ms", "worst ms"],
    [row("through the fenced endpoint", times.fenced), row("direct to Ironic (baseline)", times.direct)],
  );
  process.stdout.write(
    `nova fence bench: direct / fenced (medians) ${(median(times.direct) / median(times.fenced)).toFixed(2)}x (goal: at least 0.95x)\n`,
  );
}
