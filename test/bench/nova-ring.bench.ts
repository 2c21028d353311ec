import { NOVA_UPDATE_INTERVAL_S, startCloud } from "../helpers/openstack/cloud.js";
import {
  describeChanges,
  faultRows,
  measureFault,
  type FaultColumn,
} from "../helpers/openstack/fault-column.js";
import {
  FAULT_WINDOWS,
  ringScenario,
  SERVICE_DOWN_TIME_S,
  shardScenario,
  type FaultScenario,
} from "../helpers/openstack/fault-scenarios.js";
import type { BootingCloud } from "../helpers/openstack/cloud.js";
import { IronicEvents } from "../helpers/openstack/ironic-events.js";
import { RecordWatch } from "../helpers/openstack/record-watch.js";
import { printTable } from "./stats.js";

/**
 * One column: a booting cloud of its own (a nova-compute without a shard manages every node
 * of its Ironic, so the ring cannot share one with a shard), the scenario, the fault.
 */
async function column(
  name: string,
  scenario: (cloud: BootingCloud) => Promise<FaultScenario>,
): Promise<FaultColumn> {
  const began = performance.now();
  const cloud = await startCloud({ boot: true });
  let events: IronicEvents | null = null;
  let s: FaultScenario | null = null;
  let watch: RecordWatch | null = null;
  try {
    events = await IronicEvents.record(cloud.vhost);
    s = await scenario(cloud);
    const servers = s.servers;
    watch = new RecordWatch(cloud, s.nodes, () => servers);
    process.stdout.write(
      `nova ring bench: ${name}: ready in ${((performance.now() - began) / 1000).toFixed(0)} s; ${s.summary}\n`,
    );
    const c = await measureFault(cloud, events, watch, s.target, s.subject, FAULT_WINDOWS);
    process.stdout.write(
      `nova ring bench: ${name}: changes in the window: ${describeChanges(c.windowChanges, c.killedAt).join("; ") || "none"}; ` +
        `after the return: ${describeChanges(c.returnChanges, c.returnedAt).join("; ") || "none"}\n`,
    );
    if (watch.failures.length > 0)
      process.stdout.write(`nova ring bench: ${name}: looks that failed: ${watch.failures.join("; ")}\n`);
    return c;
  } finally {
    await watch?.stop();
    await s?.stop();
    await events?.stop();
    await cloud.stop();
  }
}

/**
 * Issue #46 item 3: nova's hash ring and `shardbridge run` through the same fault, side by
 * side, measured in the same run: six fake-hardware nodes, four servers, kill -9 of the
 * nova-compute serving one, a hard reboot of it sent right after (and every 30 s again
 * while none ran), over a window of nova's own bound; then the killed host back, until
 * settled. Each column on a booting cloud of its own (nova 34, Ironic 39, placement 16,
 * keystone, glance, neutron), one after the other.
 */
export async function novaRingBench(): Promise<void> {
  const ring = await column("nova's ring", ringScenario);
  const shardbridge = await column("shardbridge run", shardScenario);
  printTable(
    `nova's hash ring beside shardbridge run: kill -9 of the nova-compute serving an instance, then the host back ` +
      `(six nodes, four servers; window ${FAULT_WINDOWS.windowMs / 1000} s: nova's service_down_time ${SERVICE_DOWN_TIME_S} s, ` +
      `two update_resources_interval of ${NOVA_UPDATE_INTERVAL_S} s, 20 s)`,
    [
      "after kill -9 of the nova-compute serving an instance",
      "nova's ring (3 nova-computes, no shard)",
      "shardbridge run (2 supervisors, 1 shard)",
    ],
    faultRows([ring, shardbridge]),
  );
}
