import { expect } from "chai";
import { NOVA_UPDATE_INTERVAL_S, startCloud, type BootingCloud } from "./helpers/openstack/cloud.js";
import {
  describeChanges,
  faultRows,
  measureFault,
  type FaultColumn,
} from "./helpers/openstack/fault-column.js";
import {
  FAULT_WINDOWS,
  RING_HOSTS,
  ringScenario,
  SERVICE_DOWN_TIME_S,
  type FaultScenario,
} from "./helpers/openstack/fault-scenarios.js";
import { Instances, settled } from "./helpers/openstack/instances.js";
import { IronicEvents } from "./helpers/openstack/ironic-events.js";
import { readNovaLog } from "./helpers/openstack/nova-log.js";
import { RecordWatch } from "./helpers/openstack/record-watch.js";
import { printTable } from "./bench/stats.js";

/**
 * What nova 34 does without shards, on the fault nova-instances-run.test.ts puts
 * `shardbridge run` through: three nova-computes without `[ironic] shard` (nova's hash
 * ring), six fake-hardware nodes, four servers (three placed by the scheduler, the fourth
 * asked onto the least used host, so every run has one host with one instance and one free
 * node: see ringScenario), kill -9 of that nova-compute; a hard reboot of its instance sent right after and again
 * every 10 s while none has run, over a window of nova's own bound (service_down_time
 * 60 s, the cloud's nova.conf and nova's default, two update intervals and 20 s); then the
 * nova-compute started again, until the ring settles, the reboot sent every 10 s from the
 * return while none has run.
 *
 * The ring's figures are what nova does, whatever it does: this file asserts only what
 * keeps the measurement honest (the servers booted where nova's records say, the watch of
 * nova's and placement's databases saw every look, the reboot was answered), never that
 * the ring fails or succeeds. The column is printed; `make bench nova` prints it beside
 * shardbridge's, measured in the same run.
 */
describe("nova's hash ring (three nova-computes, no shard) with instances through kill -9 of one (real nova 34, Ironic 39, placement 16): the ring's column", function () {
  this.timeout(1_200_000);
  let cloud: BootingCloud;
  let events: IronicEvents;
  let scenario: FaultScenario | null = null;
  let watch: RecordWatch | null = null;
  let column: FaultColumn | null = null;

  before(async () => {
    const began = performance.now();
    cloud = await startCloud({ boot: true });
    events = await IronicEvents.record(cloud.vhost);
    const cloudMs = performance.now() - began;
    scenario = await ringScenario(cloud);
    const s = scenario;
    watch = new RecordWatch(cloud, s.nodes, () => s.servers);
    console.log(`      the cloud up in ${Math.round(cloudMs)} ms; ${s.summary}`);
  });

  after(async () => {
    await watch?.stop();
    await scenario?.stop();
    await events?.stop();
    await cloud?.stop();
  });

  it("four servers booted through the compute API are ACTIVE, each on a node whose compute node record is its host's", async () => {
    const s = scenario!;
    const records = await new Instances(cloud).records(s.servers);
    const computeNodes = cloud.novaComputeNodes().filter((c) => !c.deleted);
    for (const r of records) {
      expect(settled("ACTIVE")(r.api), `${r.api.id}: ACTIVE with no task`).to.equal(true);
      expect(RING_HOSTS, `${r.api.id}'s host`).to.include(r.db.host);
      expect(
        computeNodes.filter((c) => c.uuid === r.api.node).map((c) => c.host),
        `${r.api.id}'s node's compute node record`,
      ).to.deep.equal([r.db.host]);
    }
    expect(new Set(records.map((r) => r.api.node)).size, "four different nodes").to.equal(4);
    expect(
      records.filter((r) => r.db.host === s.killed).length,
      "instances of the host to kill",
    ).to.be.at.least(1);
  });

  it("kill -9 of a nova-compute with an instance, a hard reboot of it, the host back: what nova does, printed", async () => {
    const s = scenario!;
    const w = watch!;
    column = await measureFault(cloud, events, w, s.target, s.subject, FAULT_WINDOWS);
    const c = column;
    // What nova-compute said of the rebooted server once back (every line naming it at WARNING or above).
    const said = readNovaLog(cloud.novaComputeLog)
      .filter((l) => l.at >= c.returnedAt && l.message.includes(s.target.server) && l.level !== "DEBUG")
      .map((l) => `${l.level} ${l.message.replace(/\s+/g, " ").slice(0, 200)}`)
      .slice(0, 12);
    printTable(
      `nova's ring: kill -9 of ${s.killed}'s nova-compute (service_down_time ${SERVICE_DOWN_TIME_S} s, ` +
        `update_resources_interval ${NOVA_UPDATE_INTERVAL_S} s, report_interval 10 s)`,
      ["after kill -9 of the nova-compute serving an instance", "nova's ring"],
      faultRows([c]),
    );
    console.log(
      `      changes in the window:\n        ${describeChanges(c.windowChanges, c.killedAt).join("\n        ") || "(none)"}\n` +
        `      changes after the return:\n        ${describeChanges(c.returnChanges, c.returnedAt).join("\n        ") || "(none)"}\n` +
        `      the reboots sent: ${JSON.stringify(c.sent)}\n` +
        `      nova-compute said of the server once back:\n        ${said.join("\n        ") || "(nothing at INFO or above)"}`,
    );

    // The measurement's own honesty, not nova's behaviour: every look at the databases
    // answered, the watch looked through the whole of it, nova-api answered the reboot.
    expect(w.failures, "looks at nova's and placement's databases that failed").to.deep.equal([]);
    expect(w.looks, "looks at the databases").to.be.greaterThan(10);
    expect(c.sent.length, "reboots sent").to.be.at.least(1);
    for (const sent of [...c.sent, ...c.sentAfterReturn])
      expect(sent.status, "nova-api answered each reboot").to.be.greaterThan(0);
  });
});
