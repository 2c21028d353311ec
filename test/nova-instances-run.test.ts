import { expect } from "chai";
import type { AgentProcess } from "./helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { runShardbridge } from "./helpers/cli.js";
import { watchOverlaps } from "./helpers/processes.js";
import { until } from "./helpers/until.js";
import { ironicApi, startCloud, type BootingCloud, type NovaInstance } from "./helpers/openstack/cloud.js";
import { IronicEvents } from "./helpers/openstack/ironic-events.js";
import { enrollAvailable, powerOn, untilProvisionState } from "./helpers/openstack/nodes.js";
import { SupervisedShard } from "./helpers/openstack/nova-compute.js";
import { readNovaLog } from "./helpers/openstack/nova-log.js";
import { expectSameRecords, shardRecords } from "./helpers/openstack/records.js";

const SHARD = "rack-i";
const HOST = `${SHARD}-ironic`;
const TTL_MS = 2000;
/** The compute API's version the test speaks: `"networks": "none"` (2.37), a node asked for by name (2.74). */
const MICROVERSION = "2.90";
/** The nodes' resource class (enrollAvailable's `baremetal`), as placement names it. */
const RESOURCE_CLASS = "CUSTOM_BAREMETAL";
/**
 * How long an action nova accepted may take to finish once a nova-compute that can do it
 * runs: a deadline that says "never", not a measure (nova's ironic driver itself waits up
 * to 120 s for a power state: [ironic] api_max_retries x api_retry_interval).
 */
const ACTION_DEADLINE_MS = 120_000;
/** What the standby's start may take beyond one TTL and nova-compute's own start measured in this run. */
const TAKEOVER_MARGIN_MS = 5000;

/** A server as the compute API shows it to an admin. */
interface ServerView {
  id: string;
  status: string;
  host: string | null;
  node: string | null;
  vmState: string;
  taskState: string | null;
  powerState: number;
  created: string;
  launchedAt: string | null;
  /** nova's word on an ERROR: why (absent otherwise) */
  fault?: string;
}

/**
 * Instances on Ironic's nodes through a failover of `shardbridge run`: nova 34 (api,
 * scheduler, conductor, compute), glance 33, neutron 29, Ironic 39, placement 16 and
 * keystone 30 from PyPI, a private cloud of this file's own. One shard of six fake-hardware
 * nodes, four servers booted through the compute API and placed by the scheduler, two
 * `run` supervisors as in nova-compute-run.test.ts. Every claim is read from the
 * participants' own records: the compute API, nova's cell database, placement, Ironic's
 * API and the notifications it sends of each power action, nova-compute's log, the kernel's
 * process table.
 */
describe("instances under shardbridge run through kill -9 (real nova api/scheduler/conductor/compute, glance, neutron, Ironic)", function () {
  this.timeout(900_000);
  let cloud: BootingCloud;
  let bridge: BridgeProcess;
  let shard: SupervisedShard;
  let ironicEvents: IronicEvents;
  let watch: ReturnType<typeof watchOverlaps> | null = null;
  let nodes: string[] = [];
  let flavor = "";
  /** the servers booted in `before`, in order */
  let servers: string[] = [];
  /** the supervisors now: the active one, and the one standing by */
  let active: AgentProcess;
  let standby: AgentProcess;
  /** nova-compute's own start in this run: its process started to every node reported (ms) */
  let novaStartMs = 0;

  const server = async (id: string): Promise<ServerView> => {
    const { server: s } = await cloud.compute.call("GET", `/servers/${id}`, MICROVERSION);
    return {
      id: s.id,
      status: s.status,
      host: s["OS-EXT-SRV-ATTR:host"],
      node: s["OS-EXT-SRV-ATTR:hypervisor_hostname"],
      vmState: s["OS-EXT-STS:vm_state"],
      taskState: s["OS-EXT-STS:task_state"],
      powerState: s["OS-EXT-STS:power_state"],
      created: s.created,
      launchedAt: s["OS-SRV-USG:launched_at"],
      ...(s.fault !== undefined && { fault: `${s.fault.message} ${s.fault.details ?? ""}`.slice(0, 2000) }),
    };
  };

  /** Poll the server every 100 ms until `done` holds, within ACTION_DEADLINE_MS; an ERROR fails at once, with nova's fault. */
  const untilServer = (id: string, what: string, done: (s: ServerView) => boolean) =>
    until(
      `server ${id} ${what}`,
      async () => {
        const s = await server(id);
        if (s.status === "ERROR") throw new Error(`server ${id} went ERROR (not ${what}): ${s.fault}`);
        return s;
      },
      done,
      ACTION_DEADLINE_MS,
      100,
    );

  /** Settled: no task under way. */
  const settled = (status: string) => (s: ServerView) => s.status === status && s.taskState === null;

  /** Boot a server of the flavor and image, without networks (`node`: on that node, by name, 2.74); its id. */
  const boot = async (name: string, node?: string): Promise<string> => {
    const { server: s } = await cloud.compute.call("POST", "/servers", MICROVERSION, {
      server: {
        name,
        imageRef: cloud.image,
        flavorRef: flavor,
        networks: "none",
        ...(node !== undefined && { hypervisor_hostname: node }),
      },
    });
    return s.id as string;
  };

  /** An action on a server (reboot, os-stop, os-start): nova's answer, 202 when it took it. */
  const act = (id: string, body: unknown) =>
    cloud.compute.send("POST", `/servers/${id}/action`, MICROVERSION, body);

  /** The events of the server's last action of `name` as nova recorded them: each one's result, and why when it failed. */
  const lastAction = async (id: string, name: string) => {
    const { instanceActions } = (await cloud.compute.call(
      "GET",
      `/servers/${id}/os-instance-actions`,
      MICROVERSION,
    )) as { instanceActions: Array<{ action: string; request_id: string; start_time: string }> };
    const latest = instanceActions
      .filter((a) => a.action === name)
      .sort((a, b) => a.start_time.localeCompare(b.start_time))
      .at(-1);
    if (latest === undefined) return null;
    const { instanceAction } = await cloud.compute.call(
      "GET",
      `/servers/${id}/os-instance-actions/${latest.request_id}`,
      MICROVERSION,
    );
    const { events } = instanceAction as {
      events: Array<{ event: string; result: string | null; details?: string }>;
    };
    return events.map(({ event, result, details }) => ({ event, result, ...(details && { details }) }));
  };

  /** Placement's allocations of a server (a consumer): provider -> resources. */
  const allocations = async (id: string): Promise<Record<string, Record<string, number>>> => {
    const { allocations: held } = await cloud.placementGet(`/allocations/${id}`);
    return Object.fromEntries(
      Object.entries(held as Record<string, { resources: Record<string, number> }>).map(([rp, a]) => [
        rp,
        a.resources,
      ]),
    );
  };

  /** Ironic's node: who it is deployed for, and its states. */
  const ironicNode = async (uuid: string) => {
    const n = await ironicApi(
      cloud,
      "GET",
      `/v1/nodes/${uuid}?fields=uuid,instance_uuid,provision_state,power_state`,
    );
    return {
      uuid: n.uuid as string,
      instance: n.instance_uuid as string | null,
      provision: n.provision_state as string,
      power: n.power_state as string | null,
    };
  };

  /** Every record of the servers: the compute API's, nova's database rows, placement's allocations, Ironic's nodes. */
  const instanceRecords = async (ids: string[]) => {
    const rows = cloud.novaInstances();
    return Promise.all(
      ids.map(async (id) => {
        const api = await server(id);
        return {
          api,
          db: rows.find((r) => r.uuid === id) as NovaInstance,
          allocations: await allocations(id),
          ironic: await ironicNode(api.node!),
        };
      }),
    );
  };

  /** A server as it is after the boot: ACTIVE on the shard's host, on a node of the shard deployed for it. */
  const expectServing = (r: Awaited<ReturnType<typeof instanceRecords>>[number]) => {
    expect(r.api, "the compute API's view").to.include({ status: "ACTIVE", host: HOST, taskState: null });
    expect(nodes, "its node, of the shard").to.include(r.api.node);
    expect(r.db, "nova's instance row").to.include({
      host: HOST,
      node: r.api.node,
      vmState: "active",
      taskState: null,
      powerState: 1,
      deleted: false,
    });
    expect(r.allocations, "placement's allocation: one node of the flavor's resource class").to.deep.equal({
      [r.api.node!]: { [RESOURCE_CLASS]: 1 },
    });
    expect(r.ironic, "Ironic's node").to.deep.equal({
      uuid: r.api.node,
      instance: r.api.id,
      provision: "active",
      power: "power on",
    });
  };

  /**
   * `signal` to the active supervisor (SIGKILL: its nova-compute follows by pdeathsig and
   * its group; SIGTERM: it stops nova-compute and hands the lease back); the standby's
   * nova-compute started within the TTL and 2 s and reported every node within
   * `reportWithinMs` of the signal. The signalled host's supervisor is started again, as
   * systemd would, and stands by. `after` runs as soon as the signal is sent.
   */
  const failover = async (
    signal: "SIGKILL" | "SIGTERM",
    reportWithinMs: number,
    after?: (signalledAt: number) => Promise<void>,
  ) => {
    const signalledAt = Date.now();
    active.signal(signal);
    await after?.(signalledAt);
    const next = await shard.takeover(
      signal === "SIGKILL" ? "kill -9" : signal,
      standby,
      signalledAt,
      reportWithinMs,
    );
    const gone = active;
    await gone.exited();
    active = standby;
    standby = shard.supervise(gone.name);
    await standby.waitFor((e) => e.ev === "standby", 30_000);
    return { signalledAt, next };
  };

  /** kill -9 of the active supervisor: every node reported within one TTL, nova-compute's own start and the margin. */
  const killActive = (after?: (killedAt: number) => Promise<void>) =>
    failover("SIGKILL", TTL_MS + novaStartMs + TAKEOVER_MARGIN_MS, after);

  before(async () => {
    const began = performance.now();
    cloud = await startCloud({ boot: true });
    const cloudMs = performance.now() - began;
    ironicEvents = await IronicEvents.record(cloud.vhost);
    nodes = await enrollAvailable(
      cloud,
      Array.from({ length: 6 }, (_, i) => `bm-i-${i}`),
      SHARD,
    );
    await powerOn(cloud, nodes);
    const { flavor: f } = await cloud.compute.call("POST", "/flavors", MICROVERSION, {
      flavor: { name: "bm.baremetal", vcpus: 1, ram: 1024, disk: 10 },
    });
    flavor = f.id;
    // As baremetal flavors are set: one node of the class, nothing of the standard classes.
    await cloud.compute.call("POST", `/flavors/${flavor}/os-extra_specs`, MICROVERSION, {
      extra_specs: {
        [`resources:${RESOURCE_CLASS}`]: "1",
        "resources:VCPU": "0",
        "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0",
      },
    });
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
      env: cloud.bridgeEnv,
      args: ["--ironic", cloud.ironic],
    });
    const sync = await runShardbridge(
      ["ironic-sync", "--ironic", cloud.ironic, "--bridge", bridge.url, "--token", bridge.tokenFor("admin")],
      cloud.bridgeEnv,
    );
    expect(sync.status, sync.stderr).to.equal(0);
    shard = new SupervisedShard(cloud, bridge, SHARD, nodes, TTL_MS);
    watch = watchOverlaps(() => shard.novaComputePids());
    const first = await shard.pair();
    [active, standby] = [first.active, first.standby];
    // The host's compute service is in the cell: map it (an operator's step after a new compute).
    await cloud.discoverHosts();
    const bootAt = performance.now();
    // One boot placed before the next is sent: placement 16 on this stack let two claims
    // sent together both take a node's one unit (both PUT /allocations answered 204),
    // which no test here is about.
    for (const i of [0, 1, 2, 3]) {
      const id = await boot(`vm-${i}`);
      await untilServer(id, "placed", (s) => s.node !== null);
      servers.push(id);
    }
    for (const id of servers) await untilServer(id, "ACTIVE", settled("ACTIVE"));
    const bootMs = performance.now() - bootAt;
    // nova-compute's own start with the four instances, the baseline of the kill -9 bound:
    // a clean handover (the lease handed back, no TTL waited out), the new process's start
    // to every node reported.
    const { next } = await failover("SIGTERM", 90_000);
    novaStartMs = next.reportedAt - next.startedAt;
    console.log(
      `      the cloud up in ${Math.round(cloudMs)} ms; nova-compute's first start ${first.reportedAt - first.child.startedAt} ms, ` +
        `with the instances ${novaStartMs} ms (process to every node reported); four servers ACTIVE ${Math.round(bootMs)} ms after the first boot was sent`,
    );
  });

  after(async () => {
    const left = shard === undefined ? [] : await shard.stopAll();
    watch?.stop();
    await ironicEvents?.stop();
    await bridge?.stop();
    await cloud?.stop();
    expect(left, "nova-compute processes left behind by a killed supervisor").to.deep.equal([]);
  });

  it("four servers booted through the compute API are ACTIVE on four nodes of the shard, placed by placement", async () => {
    const records = await instanceRecords(servers);
    for (const r of records) expectServing(r);
    expect(new Set(records.map((r) => r.api.node)).size, "four different nodes").to.equal(4);
    expect(watch!.overlaps, "instants with two nova-computes for the shard").to.deep.equal([]);
  });

  it("kill -9 of the active run: every instance stays ACTIVE where it was; a reboot, a stop/start and a delete after the takeover succeed; the freed node takes a new server", async () => {
    const [rebooted, cycled, deleted, untouched] = servers as [string, string, string, string];
    const before = await instanceRecords(servers);
    const shardBefore = await shardRecords(cloud, HOST);

    const { next } = await killActive();
    // Nothing deleted, recreated or moved: the same rows, allocations and deployments.
    expect(await instanceRecords(servers), "every record of the four servers").to.deep.equal(before);
    expectSameRecords(shardBefore, await shardRecords(cloud, HOST));

    const node = (id: string) => before.find((r) => r.api.id === id)!.api.node!;
    const since = Date.now();

    const rebootAt = Date.now();
    expect((await act(rebooted, { reboot: { type: "HARD" } })).status, "the reboot taken").to.equal(202);
    await untilServer(rebooted, "rebooted", settled("ACTIVE"));
    const rebootMs = Date.now() - rebootAt;
    expect(await lastAction(rebooted, "reboot"), "nova's record of the reboot").to.deep.equal([
      { event: "compute_reboot_instance", result: "Success" },
    ]);

    const stopAt = Date.now();
    expect((await act(cycled, { "os-stop": null })).status, "the stop taken").to.equal(202);
    await untilServer(cycled, "stopped", settled("SHUTOFF"));
    expect((await ironicNode(node(cycled))).power, "its node, powered off").to.equal("power off");
    expect((await act(cycled, { "os-start": null })).status, "the start taken").to.equal(202);
    await untilServer(cycled, "started", settled("ACTIVE"));
    const stopStartMs = Date.now() - stopAt;

    const deleteAt = Date.now();
    const gone = await cloud.compute.send("DELETE", `/servers/${deleted}`, MICROVERSION);
    expect(gone.status, gone.text).to.equal(204);
    await untilProvisionState(cloud, [node(deleted)], "available", ACTION_DEADLINE_MS);
    const availableMs = Date.now() - deleteAt;
    await until(
      `server ${deleted} gone`,
      () => cloud.compute.send("GET", `/servers/${deleted}`, MICROVERSION),
      (r) => r.status === 404,
      ACTION_DEADLINE_MS,
      100,
    );
    expect(await ironicNode(node(deleted)), "the freed node in Ironic").to.deep.include({
      instance: null,
      provision: "available",
    });
    expect(await allocations(deleted), "the deleted server's allocations").to.deep.equal({});
    // nova offers the node again once its periodic update sees it available (until then it
    // reports the node's unit reserved): placement's inventory says when.
    await until(
      `node ${node(deleted)} offered in placement`,
      async () =>
        (await cloud.placementGet(`/resource_providers/${node(deleted)}/inventories`)).inventories[
          RESOURCE_CLASS
        ],
      (inventory: { total: number; reserved: number }) => inventory.reserved === 0,
      ACTION_DEADLINE_MS,
      200,
    );
    const offeredMs = Date.now() - deleteAt;

    // A new server asked onto the freed node (by name, 2.74), placed there by placement.
    const bootAt = Date.now();
    const fresh = await boot("vm-new", node(deleted));
    await untilServer(fresh, "ACTIVE", settled("ACTIVE"));
    const freshMs = Date.now() - bootAt;
    const [freshRecord] = await instanceRecords([fresh]);
    expectServing(freshRecord!);
    expect(freshRecord!.api.node, "the new server's node").to.equal(node(deleted));

    // The untouched server is exactly as it was; the others where they were.
    const after = await instanceRecords([rebooted, cycled, untouched]);
    expect(after[2], "the untouched server's records").to.deep.equal(
      before.find((r) => r.api.id === untouched),
    );
    for (const r of after) expectServing(r);
    for (const r of after)
      expect(
        [r.db.id, r.db.createdAt, r.api.node],
        `${r.api.id}: the same row, on the same node`,
      ).to.deep.equal(
        (({ db, api }) => [db.id, db.createdAt, api.node])(before.find((b) => b.api.id === r.api.id)!),
      );
    expectSameRecords(shardBefore, await shardRecords(cloud, HOST));

    // Ironic's own record of power: one power cycle for the reboot, off then on for the
    // stop/start, nothing for the untouched server's node. Read last, so a late or second
    // notification had every chance to arrive.
    const powered = (id: string) =>
      ironicEvents.powerActions(node(id), since).map((e) => [e.type, e.toPower]);
    expect(powered(rebooted), "Ironic's power actions on the rebooted server's node").to.deep.equal([
      ["baremetal.node.power_set.end", "rebooting"],
    ]);
    // (nova's stop is a clean shutdown: a soft power off, with nova's shutdown timeout)
    expect(powered(cycled), "Ironic's power actions on the stopped and started server's node").to.deep.equal([
      ["baremetal.node.power_set.end", "soft power off"],
      ["baremetal.node.power_set.end", "power on"],
    ]);
    expect(powered(untouched), "Ironic's power actions on the untouched server's node").to.deep.equal([]);
    expect(watch!.overlaps, "instants with two nova-computes for the shard").to.deep.equal([]);
    servers = [rebooted, cycled, fresh, untouched];
    console.log(
      `      after the takeover (reported ${next.reportedAt - next.startedAt} ms after its start): a hard reboot ` +
        `done in ${rebootMs} ms, a stop and start in ${stopStartMs} ms; a deleted server's node available ` +
        `in Ironic ${availableMs} ms after the delete, offered in placement ${offeredMs} ms after; a new server ` +
        `on it ACTIVE ${freshMs} ms after its boot`,
    );
  });

  it("a hard reboot sent 60-100 ms after kill -9 of the active run: the instance stays ACTIVE where it was, never cycled twice (what became of the reboot is printed)", async () => {
    const target = servers[3]!;
    const [before] = await instanceRecords([target]);
    const node = before!.api.node!;
    const since = Date.now();
    let sentAfterMs = 0;
    let answer = { status: 0, text: "" };
    const { signalledAt: killedAt, next } = await killActive(async (killedAt) => {
      await new Promise((r) => setTimeout(r, killedAt + 60 + Math.random() * 40 - Date.now()));
      sentAfterMs = Date.now() - killedAt;
      answer = await act(target, { reboot: { type: "HARD" } });
    });
    const settledView = await untilServer(target, "settled", (s) => s.taskState === null);
    const settledMs = Date.now() - killedAt;
    const [after] = await instanceRecords([target]);
    const action = await lastAction(target, "reboot");
    // What the standby's nova-compute said of the instance (its own pid's lines).
    const said = readNovaLog(cloud.novaComputeLog)
      .filter((l) => l.pid === next.pid && l.message.includes(target))
      .filter((l) => /transitional state|preempted/.test(l.message))
      .map((l) => `${l.level} ${l.message.replace(/\s+/g, " ").slice(0, 240)}`);
    const cycles = ironicEvents.powerActions(node, since).map((e) => e.toPower);

    expect(after!.api, "the compute API's view").to.include({ status: "ACTIVE", host: HOST, node });
    expect([after!.db.id, after!.db.createdAt, after!.db.deleted], "the same row").to.deep.equal([
      before!.db.id,
      before!.db.createdAt,
      false,
    ]);
    expect(after!.ironic, "Ironic's node").to.deep.equal(before!.ironic);
    expect(after!.allocations, "placement's allocation").to.deep.equal(before!.allocations);
    expect(cycles.length, `Ironic's power actions on its node (${JSON.stringify(cycles)})`).to.be.at.most(1);
    expect(watch!.overlaps, "instants with two nova-computes for the shard").to.deep.equal([]);
    console.log(
      `      a hard reboot sent ${sentAfterMs} ms after kill -9: nova-api answered ${answer.status}; the server ` +
        `${settledView.status} with no task ${settledMs} ms after the kill; Ironic's power actions on its node: ` +
        `${JSON.stringify(cycles)}; nova's record of the reboot: ${JSON.stringify(action)}; ` +
        `the standby's nova-compute said:\n        ${said.join("\n        ") || "(nothing of it)"}`,
    );
  });
});
