import { setTimeout as sleep } from "node:timers/promises";
import { readFileSync } from "node:fs";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import {
  ironicApi,
  NOVA_UPDATE_INTERVAL_S,
  startCloud,
  type OpenStackCloud,
} from "../helpers/openstack/cloud.js";
import { enrollAvailable, untilProvisionState } from "../helpers/openstack/nodes.js";
import { superviseNovaCompute } from "../helpers/openstack/nova-compute.js";
import { readNovaLog, reportedAllAt } from "../helpers/openstack/nova-log.js";
import { postInventory } from "../helpers/openstack/inspection.js";
import { until } from "../helpers/until.js";
import { novaFenceBench } from "./nova-fence.bench.js";
import { novaOutageBench } from "./nova-outage.bench.js";
import { novaRingBench } from "./nova-ring.bench.js";
import { percentile, printTable } from "./stats.js";

const SHARD = "rack-bench";
const TTL_MS = 2000;
const NODES = Number(process.env.BENCH_NOVA_NODES ?? 200);
const ROUNDS = Number(process.env.BENCH_NOVA_ROUNDS ?? 5);
const EXAMPLES = new URL("../../examples/", import.meta.url);

const row = (label: string, ms: number[]) => {
  const sorted = [...ms].sort((a, b) => a - b);
  return [label, String(ms.length), percentile(sorted, 50).toFixed(0), (sorted.at(-1) ?? NaN).toFixed(0)];
};

/**
 * The real thing, end to end: nova-compute 34 under two `shardbridge run` supervisors on a
 * shard of NODES fake-hardware nodes in Ironic 39, placement 16 and nova-conductor beside
 * them (a private cloud of this bench's own). Two rows of issue #30:
 *
 * - kill -9 of the active supervisor -> the standby's nova-compute has reported every node
 *   (nova's own log: a "Final resource view" per node from the new pid), beside the lease's
 *   own failover (the standby's `active` line) and the nova-compute's start-up (started to
 *   every node reported, the same process). The killed host's supervisor is started again
 *   as the next round's standby, as systemd would.
 * - inspection to placement: the ramdisk's callback (`POST /v1/continue_inspection`, played
 *   here: it is the ramdisk's HTTP API) -> the bridge hears Ironic's notification, reads the
 *   inventory, applies the trait rules -> the changed trait in Ironic -> on the node's
 *   resource provider in placement (nova copies Ironic's traits at its resource update,
 *   every NOVA_UPDATE_INTERVAL_S).
 *
 * Then issue #46's reboot through an outage (nova-outage.bench.ts, `make bench nova-outage`
 * alone), and its table (nova-ring.bench.ts, also `make bench nova-ring` alone): nova's
 * own hash ring and `shardbridge run` through kill -9 of the nova-compute serving an
 * instance, side by side, each on a booting cloud of its own; and the fence's cost to
 * nova-compute's start-up (nova-fence.bench.ts, `make bench nova-fence` alone).
 */
export async function novaBench(): Promise<void> {
  let cloud: OpenStackCloud | null = null;
  let bridge: BridgeProcess | null = null;
  const supervisors: AgentProcess[] = [];
  const rows = {
    lease: [] as number[],
    started: [] as number[],
    reported: [] as number[],
    startup: [] as number[],
  };
  const inspection = { ironic: [] as number[], placement: [] as number[] };
  try {
    const setupAt = performance.now();
    cloud = await startCloud();
    const c = cloud;
    const names = Array.from({ length: NODES }, (_, k) => `bench-${k}`);
    const nodes = await enrollAvailable(c, names, SHARD);
    // One more, kept manageable (inspectable), which the shard's nova-compute reports too.
    const inspected = (
      await ironicApi(c, "POST", "/v1/nodes", {
        driver: "fake-hardware",
        name: "bench-inspected",
        resource_class: "baremetal",
        shard: SHARD,
        inspect_interface: "agent",
        properties: { cpus: 8, memory_mb: 16384, local_gb: 100, cpu_arch: "x86_64" },
      })
    ).uuid as string;
    const mac = "52:54:00:00:b0:00";
    await ironicApi(c, "POST", "/v1/ports", { node_uuid: inspected, address: mac });
    await ironicApi(c, "PUT", `/v1/nodes/${inspected}/states/provision`, { target: "manage" });
    await untilProvisionState(c, [inspected], "manageable");
    process.stdout.write(
      `nova bench: cloud and ${NODES + 1} nodes ready in ${((performance.now() - setupAt) / 1000).toFixed(0)} s\n`,
    );

    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
      args: [
        ...["--ironic", c.ironic, "--ironic-notifications", c.vhost.amqpUrl],
        ...["--ironic-notifications-queue", `shardbridge.bench-${process.pid}`],
        ...["--trait-rules", new URL("trait-rules.json", EXAMPLES).pathname],
        ...["--ownership", new URL("ownership.json", EXAMPLES).pathname],
      ],
      env: { ...c.bridgeEnv, SHARDBRIDGE_LOG_LEVEL: "info" },
    });
    const b = bridge;
    const sync = await runShardbridge(
      ["ironic-sync", "--ironic", c.ironic, "--bridge", b.url, "--token", b.tokenFor("admin")],
      c.bridgeEnv,
    );
    if (sync.status !== 0) throw new Error(`ironic-sync: ${sync.stderr}`);

    const supervise = (host: string): AgentProcess => {
      const s = superviseNovaCompute(c, b, host, SHARD);
      supervisors.push(s);
      return s;
    };
    const all = [...nodes, inspected];
    const untilReported = async (pid: number, since: number) => {
      for (const deadline = performance.now() + 300_000; ; await sleep(200)) {
        const at = reportedAllAt(readNovaLog(c.novaComputeLog), pid, all, since);
        if (at !== null) return at;
        if (performance.now() > deadline)
          throw new Error(`nova-compute ${pid}: not every node reported in 300 s`);
      }
    };

    let active = supervise("host-a");
    let child = await active.waitFor((e) => e.ev === "child-started", 30_000);
    let standby = supervise("host-b");
    await standby.waitFor((e) => e.ev === "standby", 30_000);
    const firstStart = Date.now();
    await untilReported(Number(child.pid), 0);
    process.stdout.write(
      `nova bench: first nova-compute reported ${all.length} nodes ${Date.now() - firstStart} ms after the bench saw it up\n`,
    );

    for (let round = 0; round < ROUNDS; round++) {
      const from = { lease: standby.events.length };
      const faultWall = Date.now();
      const faultMono = performance.now();
      active.signal("SIGKILL");
      const lease = await standby.waitFor((e) => e.ev === "active", TTL_MS + 5000, from.lease);
      const started = await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 5000, from.lease);
      const startedWall = faultWall + (started.seenAt - faultMono);
      const reportedAt = await untilReported(Number(started.pid), faultWall);
      rows.lease.push(lease.seenAt - faultMono);
      rows.started.push(started.seenAt - faultMono);
      rows.reported.push(reportedAt - faultWall);
      rows.startup.push(reportedAt - startedWall);
      // The killed host comes back as the standby (systemd's Restart=).
      const host = active.name;
      active = standby;
      child = started;
      standby = supervise(host);
      await standby.waitFor((e) => e.ev === "standby", 30_000);
    }

    // Inspection to placement, on the node kept manageable; the CPU flag vmx toggled each
    // round, so HW_CPU_X86_VMX comes and goes.
    const result = JSON.parse(readFileSync(new URL("inspection-result.json", EXAMPLES), "utf8"));
    const traitsOf = async () =>
      (await ironicApi(c, "GET", `/v1/nodes/${inspected}/traits`)).traits as string[];
    const providerTraits = async () =>
      (await c.placementGet(`/resource_providers/${inspected}/traits`)).traits as string[];
    for (let round = 0; round < ROUNDS + 1; round++) {
      const withVmx = round % 2 === 0;
      await ironicApi(c, "PUT", `/v1/nodes/${inspected}/states/provision`, { target: "inspect" });
      await until(
        "inspect wait",
        () => ironicApi(c, "GET", `/v1/nodes/${inspected}`),
        (n) => n.provision_state === "inspect wait",
        30_000,
      );
      const flags = (result.inventory.cpu.flags as string[]).filter((f) => withVmx || f !== "vmx");
      const body = {
        inventory: {
          ...result.inventory,
          cpu: { ...result.inventory.cpu, flags },
          interfaces: result.inventory.interfaces
            .map((i: object) => ({ ...i, mac_address: mac }))
            .slice(0, 1),
          boot: { ...result.inventory.boot, pxe_interface: mac },
        },
        pci_devices: result.pci_devices,
      };
      const postedAt = await postInventory(c.ironic, body);
      const has = (t: string[]) => t.includes("HW_CPU_X86_VMX") === withVmx;
      await until("the trait in Ironic", traitsOf, has, 60_000);
      const inIronic = performance.now() - postedAt;
      await until("the trait on the provider", providerTraits, has, 120_000);
      const inPlacement = performance.now() - postedAt;
      // The first round sets the trait up; its time includes the delivery partitions' first owning.
      if (round === 0) continue;
      inspection.ironic.push(inIronic);
      inspection.placement.push(inPlacement);
    }
  } finally {
    for (const s of supervisors) await s.kill().catch(() => undefined);
    await bridge?.stop();
    await cloud?.stop();
  }
  printTable(
    `nova-compute 34 under shardbridge run: kill -9 of the active supervisor, ${NODES + 1} nodes in the shard (TTL ${TTL_MS} ms, ${ROUNDS} rounds, nova's update_resources_interval ${NOVA_UPDATE_INTERVAL_S} s)`,
    ["from kill -9 to", "rounds", "median ms", "worst ms"],
    [
      row("the standby holds the lease (the lease's own failover)", rows.lease),
      row("the standby's nova-compute started", rows.started),
      row("it has reported every node (nova's log)", rows.reported),
      row("(nova-compute's own start-up: started to every node reported)", rows.startup),
    ],
  );
  printTable(
    `Inspection to placement: the ramdisk's callback to a changed trait (Ironic 39's notifications, one bridge; nova's update_resources_interval ${NOVA_UPDATE_INTERVAL_S} s)`,
    ["from POST /v1/continue_inspection to", "rounds", "median ms", "worst ms"],
    [
      row("the trait changed in Ironic", inspection.ironic),
      row("the trait changed on nova's resource provider", inspection.placement),
    ],
  );
  // Issue #46: a reboot sent during kill -9's outage, to done; then nova's ring and
  // shardbridge run through the same fault, with instances.
  await novaOutageBench();
  await novaRingBench();
  // Issue #46: what the fence costs nova-compute's start-up, beside direct calls.
  await novaFenceBench();
}
