import { setTimeout as sleep } from "node:timers/promises";
import type { AgentProcess } from "../helpers/agent-process.js";
import type { BridgeProcess } from "../helpers/bridge-process.js";
import { startCloud, type BootingCloud } from "../helpers/openstack/cloud.js";
import { Instances, settled } from "../helpers/openstack/instances.js";
import { IronicEvents } from "../helpers/openstack/ironic-events.js";
import { enrollAvailable, powerOn } from "../helpers/openstack/nodes.js";
import { resendingShard, type SupervisedShard } from "../helpers/openstack/nova-compute.js";
import { percentile, printTable } from "./stats.js";

const SHARD = "rack-outage";
/** The lease's TTL: the tests' 2 s, or the install steps' 6 s (BENCH_NOVA_TTL_MS=6000). */
const TTL_MS = Number(process.env.BENCH_NOVA_TTL_MS ?? 2000);
const ROUNDS = Number(process.env.BENCH_NOVA_OUTAGE_ROUNDS ?? 5);
/** A deadline that says "never" for one round's reboot, not a measure. */
const REBOOT_DEADLINE_MS = 180_000;

/**
 * Issue #46's row: kill -9 of the active `run --resend-preempted` and a hard reboot of one
 * of the shard's servers sent 60–100 ms after it, ROUNDS times on one booting cloud (nova 34
 * api/scheduler/conductor/compute, glance, neutron, Ironic 39, placement 16, keystone 30).
 * Measured from the fault to nova's record of the reboot done (its compute event
 * `Success`), beside the same rounds' parts of it: the lease's failover (the standby's
 * nova-compute started), nova-compute's own start (started to every node reported), and
 * one hard reboot sent after the takeover (the reboot itself). The goal is their sum and
 * 1 s. Each round also counts the node's power cycles in Ironic's notifications (one is
 * right) and says how the reboot went: run by nova, or sent again by run (and why).
 */
export async function novaOutageBench(): Promise<void> {
  let cloud: BootingCloud | null = null;
  let bridge: BridgeProcess | null = null;
  let shard: SupervisedShard | null = null;
  let events: IronicEvents | null = null;
  const rows = {
    done: [] as number[],
    lease: [] as number[],
    startup: [] as number[],
    reboot: [] as number[],
    goal: [] as number[],
  };
  const causes: string[] = [];
  const cycles: number[] = [];
  try {
    const setupAt = performance.now();
    cloud = await startCloud({ boot: true });
    const c = cloud;
    events = await IronicEvents.record(c.vhost);
    const nodes = await enrollAvailable(
      c,
      Array.from({ length: 6 }, (_, i) => `bm-o-${i}`),
      SHARD,
    );
    await powerOn(c, nodes);
    const instances = new Instances(c);
    const flavor = await instances.baremetalFlavor();
    ({ bridge, shard } = await resendingShard(c, SHARD, nodes, TTL_MS));
    const s = shard;
    const pair = await s.pair();
    let active: AgentProcess = pair.active;
    let standby: AgentProcess = pair.standby;
    await c.discoverHosts();
    const servers = await instances.bootSerially(["vm-0", "vm-1", "vm-2", "vm-3"], flavor);
    process.stdout.write(
      `nova-outage bench: cloud, 6 nodes and 4 servers ACTIVE in ${((performance.now() - setupAt) / 1000).toFixed(0)} s\n`,
    );

    for (let round = 0; round < ROUNDS; round++) {
      const server = servers[round % servers.length]!;
      const [record] = await instances.records([server]);
      const node = record!.api.node!;
      const faultAt = Date.now();
      active.signal("SIGKILL");
      await sleep(faultAt + 60 + Math.random() * 40 - Date.now());
      const asked = await instances.act(server, { reboot: { type: "HARD" } });
      if (asked.status !== 202)
        throw new Error(`the reboot during the outage: ${asked.status} ${asked.text}`);
      const next = await s.takeover("kill -9", standby, faultAt, {
        withinMs: REBOOT_DEADLINE_MS,
        unbounded: true,
      });
      await instances.untilRebooted(server, faultAt, REBOOT_DEADLINE_MS).catch((error: Error) => {
        // What the new holder's watch of cancelled reboots said, for whoever reads the failure.
        const said = standby.events.filter((e) => /^preempted/.test(e.ev) || e.level === "warn");
        throw new Error(`${error.message}\nthe new holder's run said: ${JSON.stringify(said)}`);
      });
      const doneAt = Date.now();
      const resent = standby.events.filter((e) => e.ev === "preempted-action-resent" && e.server === server);
      causes.push(resent.length === 0 ? "nova ran it" : `resent (${String(resent[0]!.cause)})`);

      const gone = active;
      await gone.exited();
      active = standby;
      standby = s.supervise(gone.name);
      await standby.waitFor((e) => e.ev === "standby", 30_000);

      // One reboot on the settled shard: what the reboot itself takes.
      await instances.untilServer(server, "settled", settled("ACTIVE"));
      const afterAt = Date.now();
      const again = await instances.act(server, { reboot: { type: "HARD" } });
      if (again.status !== 202)
        throw new Error(`the reboot after the takeover: ${again.status} ${again.text}`);
      await instances.untilRebooted(server, afterAt, REBOOT_DEADLINE_MS);
      const rebootMs = Date.now() - afterAt;
      await instances.untilServer(server, "settled", settled("ACTIVE"));
      cycles.push(events.powerActions(node, faultAt).filter((e) => e.at < afterAt).length);

      rows.done.push(doneAt - faultAt);
      rows.lease.push(next.startedAt - faultAt);
      rows.startup.push(next.reportedAt - next.startedAt);
      rows.reboot.push(rebootMs);
      rows.goal.push(TTL_MS + (next.reportedAt - next.startedAt) + rebootMs + 1000);
      process.stdout.write(
        `nova-outage bench: round ${round + 1}: reboot done ${doneAt - faultAt} ms after kill -9 (${causes.at(-1)}); ` +
          `${cycles.at(-1)} power cycle(s) in Ironic\n`,
      );
    }

    const median = (ms: number[]) =>
      percentile(
        [...ms].sort((a, b) => a - b),
        50,
      );
    const worst = (ms: number[]) => Math.max(...ms);
    const row = (label: string, ms: number[]) => [
      label,
      String(ms.length),
      median(ms).toFixed(0),
      worst(ms).toFixed(0),
    ];
    printTable(
      `kill -9 of the active run, a hard reboot sent 60-100 ms after (TTL ${TTL_MS} ms, 6 nodes, 4 servers; ms)`,
      ["", "rounds", "median", "worst"],
      [
        row("fault -> the reboot done (nova's event Success)", rows.done),
        row("fault -> the standby's nova-compute started (lease failover)", rows.lease),
        row("nova-compute's start: started -> every node reported", rows.startup),
        row("one hard reboot sent after the takeover", rows.reboot),
        row("goal: TTL + start + one reboot + 1 s", rows.goal),
      ],
    );
    const withinGoal = rows.done.filter((d, i) => d <= rows.goal[i]!).length;
    process.stdout.write(
      `nova-outage bench: ${withinGoal} of ${ROUNDS} rounds within their goal; power cycles per reboot: ${cycles.join(", ")}; ` +
        `how each went: ${causes.join("; ")}\n`,
    );
  } finally {
    await shard?.stopAll();
    await events?.stop();
    await bridge?.stop();
    await cloud?.stop();
  }
}
