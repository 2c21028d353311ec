import { expect } from "chai";
import { startCloud, type BootingCloud } from "../helpers/openstack/cloud.js";
import { RING_HOSTS, ringScenario, type FaultScenario } from "../helpers/openstack/fault-scenarios.js";
import { Instances, settled } from "../helpers/openstack/instances.js";
import { IronicEvents } from "../helpers/openstack/ironic-events.js";
import { readNovaLog, reportsIn } from "../helpers/openstack/nova-log.js";
import { RecordWatch } from "../helpers/openstack/record-watch.js";
import { RingMigration } from "../helpers/openstack/ring-migration.js";

/**
 * nova 34 without shards, with instances, moved to shards: three nova-computes without
 * `[ironic] shard` (nova's hash ring), six fake-hardware nodes, four servers (three placed
 * by the scheduler, the fourth asked onto the least used host: see ringScenario). The ring
 * is moved as docs/OPERATIONS.md says (`migrate plan`, `prepare`, one `run`-supervised
 * nova-compute per planned shard, the ring stopped and forced down, `apply`, the printed
 * `nova-manage db ironic_compute_node_move` for each node with an instance, the ring's
 * services deleted, `verify`): every node and instance on its shard's host, nothing deleted
 * or made again, each instance rebooted once afterwards.
 *
 * What the ring itself does through kill -9 of one of its nova-computes, beside `run`, is
 * `make bench nova-ring` (the same scenario, fault-column.ts): a window of 100 s and the
 * ring's settling, which the figures need and a test of the migration does not.
 */
/** A bound for one step of the migration (a nova-compute's start, a resource update, every record moved): a deadline that says "never". */
const MIGRATION_STEP_MS = 180_000;

describe("nova's hash ring (three nova-computes, no shard) with instances, moved to shards (real nova 34, Ironic 39, placement 16)", function () {
  this.timeout(1_200_000);
  let cloud: BootingCloud;
  let events: IronicEvents;
  let scenario: FaultScenario | null = null;
  let watch: RecordWatch | null = null;
  let migration: RingMigration | null = null;

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
    await migration?.stop();
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

  it("the migration with instances: plan, apply and the printed nova-manage moves take every node and instance to its shard's run-supervised nova-compute, each instance rebooted once after", async () => {
    const s = scenario!;
    const w = watch!;
    const instances = new Instances(cloud);
    // From nova's ring settled: every server ACTIVE with no task.
    const settledAt = await s.subject.untilSettled(Date.now(), MIGRATION_STEP_MS);
    expect(settledAt, "nova's ring settled before the migration").to.not.equal(null);
    for (const id of s.servers) await instances.untilServer(id, "ACTIVE", settled("ACTIVE"));
    const before = await instances.records(s.servers);
    const hostOfRecord = new Map(
      cloud
        .novaComputeNodes()
        .filter((c) => !c.deleted && s.nodes.includes(c.uuid))
        .map((c) => [c.uuid, c.host]),
    );

    const began = Date.now();
    migration = await RingMigration.start(cloud, RING_HOSTS);
    const m = migration;
    // The operator's source for each deployed node's host: the compute API (`openstack server list --long`).
    await m.tellInstanceHosts(new Map(before.map((r) => [r.api.node!, r.api.host!])));
    const plan = await m.makePlan();
    expect(plan.unplaced, "nodes the plan could not place").to.deep.equal([]);
    const shardOf = new Map(plan.shards.flatMap((p) => p.nodes.map((uuid) => [uuid, p])));
    const newHostOf = (uuid: string) => `${shardOf.get(uuid)!.name}-ironic`;
    expect(
      s.nodes.map((uuid) => `${uuid} ${shardOf.get(uuid)?.active}`).sort(),
      "each node's shard on the agent whose nova-compute holds its record",
    ).to.deep.equal(s.nodes.map((uuid) => `${uuid} ${hostOfRecord.get(uuid)}`).sort());
    expect(
      plan.nova.moves.map((move) => `${move.uuid} ${move.from} -> ${move.to}`).sort(),
      "a printed nova-manage move for each node with an instance, from the instance's host",
    ).to.deep.equal(before.map((r) => `${r.api.node} ${r.api.host} -> ${newHostOf(r.api.node!)}`).sort());

    const prepared = await m.step("prepare");
    expect(prepared.status, prepared.stderr).to.equal(0);
    const newPid = await m.startShardComputes(MIGRATION_STEP_MS);
    // The new hosts mapped to the cell, as for any new compute.
    await cloud.discoverHosts();
    await s.stop();
    await m.forceDownRing();
    const applyAt = Date.now();
    const applied = await m.step("apply");
    expect(applied.status, applied.stdout + applied.stderr).to.equal(0);
    const appliedAt = Date.now();
    const moves = await m.runPrintedMoves();
    const movedAt = Date.now();
    expect(moves.length, "nova-manage moves run").to.equal(before.length);

    // Every record on its shard's host (nova moves the nodes without an instance by itself,
    // at the shard's next resource update), every instance with its node, every node
    // reported by the new host.
    const onNewHosts = () => {
      const records = cloud.novaComputeNodes().filter((c) => !c.deleted && s.nodes.includes(c.uuid));
      const rows = cloud.novaInstances().filter((i) => s.servers.includes(i.uuid));
      return (
        records.every((c) => c.host === newHostOf(c.uuid)) &&
        rows.every((i) => !i.deleted && i.host === newHostOf(i.node!))
      );
    };
    const reportedByNew = () => {
      const reports = reportsIn(readNovaLog(cloud.novaComputeLog), movedAt);
      return s.nodes.every((uuid) =>
        reports.some((r) => r.uuid === uuid && r.pid === newPid.get(newHostOf(uuid))),
      );
    };
    const deadline = performance.now() + MIGRATION_STEP_MS;
    while (!(onNewHosts() && reportedByNew())) {
      if (performance.now() > deadline)
        throw new Error(`nodes and instances not on their shards' hosts within ${MIGRATION_STEP_MS} ms`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const everyReportedAt = Date.now();

    expect(
      cloud.novaComputeNodes().filter((c) => !c.deleted && RING_HOSTS.includes(c.host)),
      "compute nodes left on the ring's services",
    ).to.deep.equal([]);
    await m.deleteRingServices();
    expect(await m.services(RING_HOSTS), "the ring's services, deleted").to.deep.equal([]);
    const verified = await m.step("verify");
    expect(verified.status, verified.stdout + verified.stderr).to.equal(0);

    // Each instance rebooted through the compute API, on its new host: done once, one power cycle.
    const rebootAt = Date.now();
    for (const r of before) {
      const answer = await instances.act(r.api.id, { reboot: { type: "HARD" } });
      expect(answer.status, `reboot of ${r.api.id}`).to.equal(202);
    }
    for (const r of before) {
      const reboots = await instances.untilRebooted(r.api.id, rebootAt);
      expect(reboots.length, `reboots of ${r.api.id} since the migration`).to.equal(1);
      await instances.untilServer(r.api.id, "ACTIVE", settled("ACTIVE"));
    }
    await w.caughtUp();
    const endedAt = Date.now();
    const after = await instances.records(s.servers);
    for (const r of after) {
      const was = before.find((b) => b.api.id === r.api.id)!;
      expect(
        [r.api.status, r.api.host, r.api.node, r.db.id, r.ironic.instance],
        `${r.api.id}: ACTIVE on its node, now its shard's host, the same row, Ironic's instance`,
      ).to.deep.equal(["ACTIVE", newHostOf(was.api.node!), was.api.node, was.db.id, r.api.id]);
      expect(r.allocations, `${r.api.id}'s allocations`).to.deep.equal(was.allocations);
      expect(
        events.powerActions(r.api.node!, rebootAt).map((e) => [e.type, e.toPower]),
        `Ironic's power actions on ${r.api.id}'s node`,
      ).to.deep.equal([["baremetal.node.power_set.end", "rebooting"]]);
    }

    // nova's and placement's records through it: each node's record and each instance
    // changed host once, to its shard's; nothing deleted, made again or duplicated.
    const changes = w.between(began, endedAt);
    const counts = RecordWatch.count(changes);
    const hostChanges = (kind: "moved" | "instance-moved") =>
      changes
        .filter((c) => c.kind === kind)
        .map((c) => `${c.subject} ${c.from} -> ${c.to}`)
        .sort();
    expect(hostChanges("moved"), "compute node records' host changes").to.deep.equal(
      s.nodes.map((uuid) => `${uuid} ${hostOfRecord.get(uuid)} -> ${newHostOf(uuid)}`).sort(),
    );
    expect(hostChanges("instance-moved"), "instances' host changes").to.deep.equal(
      before
        .map((r) => `${r.api.id} ${r.api.host}/${r.api.node} -> ${newHostOf(r.api.node!)}/${r.api.node}`)
        .sort(),
    );
    expect(
      [counts.deleted, counts.created, counts.duplicated, counts["provider-recreated"]],
      "records deleted, made again or duplicated; providers made again",
    ).to.deep.equal([0, 0, 0, 0]);
    // Who reported each node since the ring settled, from nova's log: one ring process, then
    // its shard's nova-compute, never back, never two at once.
    const hostOfPid = new Map([...newPid].map(([host, pid]) => [pid, host] as const));
    const reporters = (uuid: string) =>
      reportsIn(readNovaLog(cloud.novaComputeLog), settledAt!)
        .filter((r) => r.uuid === uuid)
        .map((r) => hostOfPid.get(r.pid) ?? `ring pid ${r.pid}`)
        .filter((h, i, all) => i === 0 || all[i - 1] !== h);
    for (const uuid of s.nodes) {
      const [ring, ...rest] = reporters(uuid);
      expect([ring?.startsWith("ring pid "), rest], `who reported ${uuid}, in order`).to.deep.equal([
        true,
        [newHostOf(uuid)],
      ]);
    }
    console.log(
      `      migrated ${s.nodes.length} nodes (${before.length} with instances) from ${RING_HOSTS.length} ring ` +
        `nova-computes to ${plan.shards.length} shards: apply ${appliedAt - applyAt} ms, ${moves.length} ` +
        `nova-manage moves ${movedAt - appliedAt} ms, every node and instance on its shard's host and ` +
        `reported there ${everyReportedAt - applyAt} ms after apply began; ${changes.length} record changes ` +
        `(${JSON.stringify(counts)}); reboots after: one power cycle each`,
    );
  });
});
