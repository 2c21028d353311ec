import { untilSome } from "../helpers/until.js";
import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { PlanFile } from "../../src/tools/migrate/plan-file.js";
import { buildRing } from "../../src/core/ring/legacy.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { running } from "../helpers/processes.js";
import { freePort } from "../helpers/redis-server.js";
import { NOVA_UPDATE_INTERVAL_S, sharedCloud, type OpenStackCloud } from "../helpers/openstack/cloud.js";
import { ironicAnswers, startIronic } from "../helpers/openstack/ironic.js";
import { TestDatabases } from "../helpers/openstack/mariadb.js";
import { enrollAvailable } from "../helpers/openstack/nodes.js";
import { startNovaApi, type NovaApi } from "../helpers/openstack/nova-api.js";
import { readNovaLog, reportsIn, ringsOf, takenIn, updatedEmpty } from "../helpers/openstack/nova-log.js";
import { Service } from "../helpers/openstack/service.js";
import { NO_FUZZY_DELAY, superviseNovaCompute } from "../helpers/openstack/nova-compute.js";
import { openstackBin } from "../helpers/openstack/venv.js";

/** nova's ring today: three nova-computes without `[ironic] shard`. */
const AGENTS = ["compute-a", "compute-b", "compute-c"];
const PER_AGENT = 3;
/** The cloud's nova.conf: a service not heard from for longer is down (nova's `service_is_up`). */
const SERVICE_DOWN_TIME_MS = 60_000;
/** Between two looks at nova's cell database and placement. */
const POLL_MS = 100;

/**
 * What nova's cell database and placement's say of the nodes, looked at every POLL_MS: at
 * each look every node must have exactly one compute node record (never deleted, never
 * replaced: the same row id) and its resource provider (uuid = node uuid), never replaced
 * either (placement's row id: a provider deleted and made again between two looks has a new
 * one, so no look can miss it; its generation, which placement only raises, says nothing
 * more). Each change of a node's host is recorded with when it was seen.
 */
class NovaWatch {
  looks = 0;
  readonly problems: string[] = [];
  readonly moves: Array<{ uuid: string; from: string; to: string; at: number }> = [];
  readonly host = new Map<string, string>();
  private readonly rowId = new Map<string, number>();
  private readonly providerId = new Map<string, number>();
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly cloud: OpenStackCloud,
    private readonly nodes: readonly string[],
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      await this.look().catch((error: Error) => this.problems.push(`a look failed: ${error.message}`));
      await sleep(POLL_MS);
    }
  }

  /** One look at both: nova's rows first, then placement's providers. */
  async look(): Promise<void> {
    const at = Date.now();
    const rows = this.cloud.novaComputeNodes();
    const providers = new Map(this.cloud.placementProviders().map((p) => [p.uuid, p]));
    this.looks++;
    const when = new Date(at).toISOString();
    for (const uuid of this.nodes) {
      const mine = rows.filter((r) => r.uuid === uuid);
      if (mine.length !== 1 || mine[0]!.deleted) {
        this.problems.push(
          `${when} ${uuid}: compute node records ${JSON.stringify(mine.map((r) => [r.id, r.host, r.deleted]))}`,
        );
        continue;
      }
      const { id, host } = mine[0]!;
      if ((this.rowId.get(uuid) ?? id) !== id)
        this.problems.push(`${when} ${uuid}: record ${this.rowId.get(uuid)} replaced by ${id}`);
      this.rowId.set(uuid, id);
      const was = this.host.get(uuid);
      if (was !== undefined && was !== host) this.moves.push({ uuid, from: was, to: host, at });
      this.host.set(uuid, host);
      const provider = providers.get(uuid);
      if (provider === undefined) {
        this.problems.push(`${when} ${uuid}: no resource provider`);
        continue;
      }
      if ((this.providerId.get(uuid) ?? provider.id) !== provider.id)
        this.problems.push(
          `${when} ${uuid}: provider ${this.providerId.get(uuid)} replaced by ${provider.id}`,
        );
      this.providerId.set(uuid, provider.id);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/**
 * The migration from nova's hash ring to shards, against nova 34 itself: a fleet of
 * Ironic nodes that three nova-computes without `[ironic] shard` spread by nova's own ring,
 * planned by `migrate plan` (whose ring must be the one nova used, node for node), then
 * moved by the printed steps to one `shardbridge run`-supervised nova-compute per shard.
 *
 * The nodes live in an Ironic of this test's own (Ironic 39 behind the cloud's keystone,
 * same cloud otherwise: nova's databases, conductor, placement): a nova-compute without a
 * shard manages every node of the Ironic it is given, so in the shared Ironic it would take
 * the other test files' nodes (their compute node records too). nova-api runs here for the
 * two steps that need it: forcing the old services down and deleting them, the calls
 * `openstack compute service set --down` and `openstack compute service delete` make.
 *
 * Nodes without instances, which nova moves by itself (the resource tracker takes a
 * compute node record whose host is another's: `_init_compute_node`, "ComputeNode ...
 * moving from ... to ..."), and `nova-manage db ironic_compute_node_move` in the form the
 * plan prints, run on one node once the old services are forced down (nova 34 accepts a
 * node without an instance: it moves the record, and the instances on it, of which there
 * are none); the shard's nova-compute then keeps it. Nodes with instances are migrated in
 * test/openstack/nova-ring-instances.test.ts, whose cloud boots them.
 */
describe("migrate from nova's ring to shards with nova 34 (real nova-computes, Ironic 39, placement 16)", function () {
  this.timeout(900_000);
  let cloud: OpenStackCloud;
  let dir: string;
  let databases: TestDatabases;
  let ironic: Service | null = null;
  let ironicUrl: string;
  let novaApi: Promise<NovaApi> | null = null;
  let bridge: BridgeProcess | null = null;
  let nodes: string[] = [];
  const old = new Map<string, Service>();
  let supervisors: AgentProcess[] = [];
  let plan: PlanFile;
  /** From when (nova's log) every report of a node is its old host's: nova's ring settled */
  let ringSettledAt: number;
  let planText: string;
  let planPath: string;
  /** nova's host for each node, as the old ring left it */
  let novaHostOf = new Map<string, string>();

  /** The cloud, with the test's own Ironic in place of the shared one (for the node helpers). */
  const ownIronic = (): OpenStackCloud => ({ ...cloud, ironic: ironicUrl });

  /** A migrate step; one given `--ironic` runs as the cloud's system admin (Ironic lets only an admin write shard keys). */
  const migrate = (...args: string[]) =>
    runShardbridge(
      ["migrate", ...args, "--bridge", bridge!.url, "--token", bridge!.tokenFor("admin")],
      args.includes("--ironic") ? cloud.keystone.adminOpenrc("system") : cloud.bridgeEnv,
    );

  /** A nova-compute of nova's ring: no shard, its own host, Ironic given directly. */
  const startOld = (host: string): Service => {
    const state = join(dir, host);
    mkdirSync(state, { recursive: true });
    const service = Service.start(
      host,
      openstackBin("nova-compute"),
      ["--config-file", cloud.novaConf],
      join(dir, `${host}.out`),
      {
        ...NO_FUZZY_DELAY,
        OS_DEFAULT__HOST: host,
        OS_IRONIC__ENDPOINT_OVERRIDE: ironicUrl,
        OS_DEFAULT__STATE_PATH: state,
      },
    );
    old.set(host, service);
    return service;
  };

  /** `shardbridge run` on `agent`'s host for `shard`, nova-compute its command. */
  const supervise = (agent: string, shard: string): AgentProcess => {
    const s = superviseNovaCompute(cloud, bridge!, agent, shard, NO_FUZZY_DELAY);
    supervisors.push(s);
    return s;
  };

  /** Hosts of other nova-compute services nova would still count as up and put in a ring (other test files'). */
  const othersUp = (): string[] => {
    const withNodes = new Set(
      cloud
        .novaComputeNodes()
        .filter((c) => !c.deleted)
        .map((c) => c.host),
    );
    return cloud
      .novaServices()
      .filter(
        (s) =>
          !s.deleted &&
          !s.forcedDown &&
          withNodes.has(s.host) &&
          !AGENTS.includes(s.host) &&
          s.updatedAt !== null &&
          Date.now() - Date.parse(`${s.updatedAt.replace(" ", "T")}Z`) <= SERVICE_DOWN_TIME_MS + 2000,
      )
      .map((s) => s.host);
  };

  /** Every compute service record of the test (old and new hosts) nova's API still lists. */
  const ourServices = async (api: NovaApi) => {
    const hosts = new Set([...AGENTS, ...(plan?.nova.services.map((s) => s.host) ?? [])]);
    const { services } = await api.call("GET", "/os-services?binary=nova-compute", "2.53");
    return (services as Array<{ id: string; host: string; forced_down: boolean; state: string }>).filter(
      (s) => hosts.has(s.host),
    );
  };

  /** Stop the supervisors (TERM: nova-compute stopped, lease handed back) and wait for their nova-computes. */
  const stopSupervisors = async () => {
    const children = supervisors.flatMap((s) =>
      s.events.filter((e) => e.ev === "child-started").map((e) => Number(e.pid)),
    );
    for (const s of supervisors) s.signal("SIGTERM");
    await Promise.all(supervisors.map((s) => Promise.race([s.exited(), sleep(15_000).then(() => s.kill())])));
    supervisors = [];
    await untilSome(
      "the supervised nova-computes gone",
      () => (children.some(running) ? null : true),
      15_000,
      50,
    );
  };

  before(async () => {
    cloud = await sharedCloud();
    const began = performance.now();
    dir = join(cloud.dir, `migrate-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const run = `sbm_${process.pid}_${randomBytes(3).toString("hex")}`;
    databases = new TestDatabases(run);
    const port = await freePort();
    ironicUrl = `http://127.0.0.1:${port}`;
    ironic = await startIronic({
      dir: join(dir, "ironic"),
      port,
      databases,
      vhost: cloud.vhost,
      host: `${run}-conductor`,
      // Behind the cloud's keystone, as the shared Ironic is: nova-compute, the bridge and
      // the test each call it with a token of their own.
      keystone: cloud.keystone,
      // Its notifications would reach whatever listens on the cloud's vhost.
      extra: { oslo_messaging_notifications: { driver: "noop" } },
    });
    novaApi = startNovaApi(cloud, join(dir, "nova-api"));
    novaApi.catch(() => undefined);
    await ironic.until(async () => ironicAnswers(ironicUrl, await cloud.ironicHeaders()), 120_000);
    const ironicUpMs = performance.now() - began;

    // Uuids nova's ring (as shardbridge computes it) gives PER_AGENT to each agent, so no
    // agent is left without nodes; whether nova itself agrees is what the first case checks.
    const ring = buildRing("tooz", AGENTS);
    const picked = new Map(AGENTS.map((a) => [a, [] as string[]]));
    while ([...picked.values()].some((u) => u.length < PER_AGENT)) {
      const uuid = randomUUID();
      const mine = picked.get(ring.memberOf(uuid)!)!;
      if (mine.length < PER_AGENT) mine.push(uuid);
    }
    const uuids = [...picked.values()].flat();
    nodes = await enrollAvailable(
      ownIronic(),
      uuids.map((_, i) => `bm-m-${i}`),
      null,
      uuids,
    );
    console.log(
      `      the test's Ironic answered ${Math.round(ironicUpMs)} ms after its start, ${nodes.length} nodes ` +
        `available ${Math.round(performance.now() - began - ironicUpMs)} ms later`,
    );

    // A service of another test file that reported within service_down_time is in nova's
    // ring (nova's database is shared): wait until nova counts it as down.
    const waited = performance.now();
    await untilSome("other nova-computes down", () => (othersUp().length === 0 ? true : null), 90_000, 1000);
    const waitedMs = performance.now() - waited;
    if (waitedMs > 1000)
      console.log(`      waited ${Math.round(waitedMs)} ms for other test files' nova-computes to be down`);

    // The first nova-compute creates every node's record (two creating the same record at
    // once would stop one of them at start-up: a duplicate record is fatal then); the others
    // join it. nova's ring then settles on its own: each nova-compute rebuilds its ring at
    // each update from the services that are up and have compute nodes, and takes the
    // records of its share (settled: see below).
    const started = Date.now();
    const first = startOld(AGENTS[0]!).pid;
    await untilSome(
      `${AGENTS[0]} created every node's record`,
      () => (nodes.every((uuid) => cloud.novaComputeNodes().some((c) => c.uuid === uuid)) ? true : null),
      120_000,
    );
    const pids = [first, ...AGENTS.slice(1).map((host) => startOld(host).pid)];
    const full = await untilSome(
      "every old nova-compute with all three in its ring",
      () => {
        const log = readNovaLog(cloud.novaComputeLog);
        const firsts = pids.map(
          (pid) => ringsOf(log, pid).find((r) => r.members.join() === AGENTS.join())?.at ?? null,
        );
        return firsts.every((at) => at !== null) ? Math.max(...firsts) : null;
      },
      180_000,
    );
    // The hosts mapped to the cell, as an operator does for new computes (the compute API
    // finds a service by host through its mapping).
    const mapped = cloud.novaManage("cell_v2", "discover_hosts", "--by-service");
    // From `full` on no ring is stale: every report is its owner's. Settled once every node
    // has been reported since, each by one nova-compute only.
    const owner = await untilSome(
      "every node reported by one nova-compute over the full ring",
      () => {
        const reports = reportsIn(readNovaLog(cloud.novaComputeLog), full);
        const by = nodes.map((uuid) => [
          ...new Set(reports.filter((r) => r.uuid === uuid).map((r) => r.pid)),
        ]);
        return by.every((reporters) => reporters.length === 1)
          ? new Map(nodes.map((uuid, i) => [uuid, AGENTS[pids.indexOf(by[i]![0]!)]!]))
          : null;
      },
      120_000,
    );
    await mapped;
    ringSettledAt = full;
    const records = cloud.novaComputeNodes().filter((c) => nodes.includes(c.uuid));
    expect(
      records
        .filter((c) => !c.deleted)
        .map((c) => c.uuid)
        .sort(),
      "one compute node record per node",
    ).to.deep.equal([...nodes].sort());
    expect(records.filter((c) => c.deleted)).to.deep.equal([]);
    novaHostOf = new Map(records.map((c) => [c.uuid, c.host]));
    expect(novaHostOf, "each node's record on the nova-compute that reported it").to.deep.equal(owner);
    const { resource_providers: rps } = await cloud.placementGet("/resource_providers");
    expect(
      (rps as Array<{ uuid: string }>)
        .map((rp) => rp.uuid)
        .filter((u) => nodes.includes(u))
        .sort(),
      "one resource provider per node",
    ).to.deep.equal([...nodes].sort());
    console.log(
      `      nova's ring settled ${Date.now() - started} ms after the first of ${AGENTS.length} nova-computes started: ` +
        AGENTS.map((a) => `${a} ${[...novaHostOf.values()].filter((h) => h === a).length}`).join(", "),
    );

    bridge = await startBridge({
      shards: [],
      agents: AGENTS,
      env: cloud.bridgeEnv,
      args: ["--ironic", ironicUrl],
    });
    const sync = await runShardbridge(
      [
        ...["ironic-sync", "--ironic", ironicUrl, "--bridge", bridge.url],
        ...["--token", bridge.tokenFor("admin")],
      ],
      cloud.bridgeEnv,
    );
    expect(sync.status, sync.stderr).to.equal(0);
  });

  after(async () => {
    await stopSupervisors().catch((e: Error) => console.log(`      cleanup: ${e.message}`));
    for (const service of old.values()) await service.stop();
    const api = await novaApi?.catch(() => null);
    if (api !== null && api !== undefined) {
      for (const s of await ourServices(api).catch(() => []))
        await api
          .call("DELETE", `/os-services/${s.id}`, "2.53")
          .catch((e: Error) => console.log(`      cleanup: ${e.message}`));
      await api.stop();
    }
    await bridge?.stop();
    await ironic?.stop();
    databases?.drop();
  });

  it("migrate plan puts every node with the nova-compute nova 34's own ring gave it", async () => {
    planPath = join(dir, "plan.json");
    const made = await migrate("plan", "--agents", AGENTS.join(","), "--out", planPath);
    expect(made.status, made.stderr).to.equal(0);
    planText = made.stdout;
    plan = JSON.parse(readFileSync(planPath, "utf8"));
    expect(plan.unplaced).to.deep.equal([]);
    expect(
      plan.shards.flatMap((s) => s.nodes.map((uuid) => `${uuid} ${s.active}`)).sort(),
      "the plan's agent for each node against nova's compute node host",
    ).to.deep.equal(nodes.map((uuid) => `${uuid} ${novaHostOf.get(uuid)}`).sort());
    expect(plan.nova.old_services).to.deep.equal(AGENTS);
    // No node has an instance: the plan prints no nova-manage move.
    expect(plan.nova.moves).to.deep.equal([]);
    expect(planText).not.to.include("nova-manage db ironic_compute_node_move --ironic-node-uuid");
    for (const s of plan.nova.services) expect(s.host).to.equal(`${s.shard}-ironic`);
  });

  it("prepare, run, stop and force down, apply, nova's side, verify: every node moves once, to its shard's nova-compute, nothing lost", async () => {
    const api = await novaApi!;
    const watch = new NovaWatch(cloud, nodes);
    try {
      const prepared = await migrate("prepare", planPath);
      expect(prepared.status, prepared.stderr).to.equal(0);

      // One nova-compute per planned shard, under its lease: empty shards, so it manages nothing yet.
      for (const s of plan.nova.services) supervise(s.agent, s.shard);
      const newPid = new Map<string, number>();
      await Promise.all(
        supervisors.map(async (s, i) => {
          const e = await s.waitFor((ev) => ev.ev === "child-started", 60_000);
          newPid.set(plan.nova.services[i]!.host, Number(e.pid));
        }),
      );
      await untilSome(
        "every new nova-compute through one resource update (with nothing in its shard)",
        () => {
          const log = readNovaLog(cloud.novaComputeLog);
          return [...newPid.values()].every((pid) => updatedEmpty(log, pid)) ? true : null;
        },
        120_000,
      );
      const newHosts = plan.nova.services.map((s) => s.host);
      expect(cloud.novaComputeNodes().filter((c) => newHosts.includes(c.host))).to.deep.equal([]);

      // nova's side before the keys land: stop the old nova-computes, force them down.
      const stoppedAt = Date.now();
      await Promise.all([...old.values()].map((s) => s.stop()));
      for (const host of plan.nova.old_services) {
        // What `openstack --os-compute-api-version 2.11 compute service set --down HOST nova-compute` sends.
        const { service } = await api.call("PUT", "/os-services/force-down", "2.11", {
          host,
          binary: "nova-compute",
          forced_down: true,
        });
        expect(service).to.deep.include({ host, forced_down: true });
      }

      // nova-manage's move, in the form the plan prints, on the first node of the first shard.
      const byManage = plan.shards.slice(0, 1).map((s) => ({ uuid: s.nodes[0]!, to: `${s.name}-ironic` }));
      await Promise.all(
        byManage.map(({ uuid, to }) => {
          const command = `nova-manage db ironic_compute_node_move --ironic-node-uuid ${uuid} --destination-host ${to}`;
          return cloud.novaManage(...command.split(" ").slice(1));
        }),
      );
      for (const { uuid, to } of byManage)
        expect(
          cloud.novaComputeNodes().find((c) => c.uuid === uuid && !c.deleted)?.host,
          `${uuid} after nova-manage`,
        ).to.equal(to);

      const applyAt = Date.now();
      const applied = await migrate("apply", planPath, "--ironic", ironicUrl);
      const appliedAt = Date.now();
      expect(applied.status, applied.stdout + applied.stderr).to.equal(0);

      // The printed moves (none: no node has an instance) would run here.
      const printed = [...planText.matchAll(/nova-manage db ironic_compute_node_move .*/g)];
      expect(printed).to.deep.equal([]);

      const shardHost = new Map(
        plan.shards.flatMap((s) => s.nodes.map((uuid) => [uuid, `${s.name}-ironic`])),
      );
      const allMovedAt = await untilSome(
        "every node on its shard's nova-compute (nova's database)",
        () => (nodes.every((uuid) => watch.host.get(uuid) === shardHost.get(uuid)) ? Date.now() : null),
        (3 * NOVA_UPDATE_INTERVAL_S + 30) * 1000,
        50,
      );
      const allReportedAt = await untilSome(
        "every node reported by its shard's nova-compute (nova's log)",
        () => {
          const reports = reportsIn(readNovaLog(cloud.novaComputeLog), applyAt);
          const firsts = nodes.map(
            (uuid) =>
              reports.find((r) => r.uuid === uuid && r.pid === newPid.get(shardHost.get(uuid)!))?.at ?? null,
          );
          return firsts.every((at) => at !== null) ? Math.max(...firsts) : null;
        },
        (3 * NOVA_UPDATE_INTERVAL_S + 30) * 1000,
      );

      // Delete the old services, once they hold no compute nodes (what `openstack compute service delete` calls).
      expect(
        cloud.novaComputeNodes().filter((c) => !c.deleted && AGENTS.includes(c.host)),
        "compute nodes left on the old services",
      ).to.deep.equal([]);
      for (const s of (await ourServices(api)).filter((s) => AGENTS.includes(s.host)))
        await api.call("DELETE", `/os-services/${s.id}`, "2.53");
      expect((await ourServices(api)).map((s) => s.host).sort()).to.deep.equal([...newHosts].sort());

      const verified = await migrate("verify", planPath, "--ironic", ironicUrl);
      expect(verified.status, verified.stdout + verified.stderr).to.equal(0);
      // One more look, after the deletes.
      await sleep(2 * POLL_MS);
      await watch.stop();

      // Who reported each node, from nova's log: the old host, then its shard's, never back.
      // Since nova's ring settled (before: each node reported there by its old host alone),
      // not since the watch began: an old nova-compute reports a node every
      // NOVA_UPDATE_INTERVAL_S, and on a quiet machine the new ones were up and the old ones
      // stopped before it had (seen: the new host alone).
      const hostOfPid = new Map([
        ...[...old].map(([host, s]) => [s.pid, host] as const),
        ...[...newPid].map(([host, pid]) => [pid, host] as const),
      ]);
      const log = readNovaLog(cloud.novaComputeLog);
      const reports = reportsIn(log, ringSettledAt);
      const reporters = new Map(
        nodes.map((uuid) => [
          uuid,
          reports
            .filter((r) => r.uuid === uuid)
            .map((r) => hostOfPid.get(r.pid) ?? `pid ${r.pid}`)
            .filter((h, i, all) => i === 0 || all[i - 1] !== h),
        ]),
      );
      // How long each node went without a report: its old host's last, to its new host's first.
      const gaps = nodes.map((uuid) => {
        const mine = reports.filter((r) => r.uuid === uuid);
        const lastOld = Math.max(...mine.filter((r) => old.has(hostOfPid.get(r.pid) ?? "")).map((r) => r.at));
        const firstNew = mine.find((r) => hostOfPid.get(r.pid) === shardHost.get(uuid))!.at;
        return firstNew - lastOld;
      });
      const takenAt = watch.moves
        .filter((m) => !byManage.some((n) => n.uuid === m.uuid))
        .map((m) => m.at - applyAt);
      console.log(
        `      ${nodes.length} nodes from ${AGENTS.length} nova-computes of nova's ring to ${plan.shards.length} shards ` +
          `(${byManage.length} moved by nova-manage, ${nodes.length - byManage.length} by nova): ${watch.looks} looks at ` +
          `nova's database and placement (every ~${POLL_MS} ms), ${watch.moves.length} host changes, ` +
          `${watch.problems.length} problems; apply took ${appliedAt - applyAt} ms; nova moved its nodes ` +
          `${Math.min(...takenAt)}-${Math.max(...takenAt)} ms after apply started, every node on its new host ` +
          `${allMovedAt - applyAt} ms after (${allMovedAt - appliedAt} ms after it ended), reported ` +
          `there ${allReportedAt - applyAt} ms after; old nova-computes stopped ${applyAt - stoppedAt} ms before ` +
          `apply; a node went ${Math.min(...gaps)}-${Math.max(...gaps)} ms without a report`,
      );
      expect(watch.problems, "looks where a node lacked exactly one record or its provider").to.deep.equal(
        [],
      );
      const taken = takenIn(log, ringSettledAt);
      for (const uuid of nodes) {
        const to = shardHost.get(uuid)!;
        const move = `${novaHostOf.get(uuid)} -> ${to}`;
        expect(
          watch.moves.filter((m) => m.uuid === uuid).map((m) => `${m.from} -> ${m.to}`),
          `${uuid}'s host changes`,
        ).to.deep.equal([move]);
        // Each time a shard's nova-compute took the node's record, by its own log line: once,
        // from the old host (the node nova-manage moved: never). Only takes to the new
        // hosts: old ones still took their share of the first one's records as they joined.
        expect(
          taken.filter((t) => t.uuid === uuid && !AGENTS.includes(t.to)).map((t) => `${t.from} -> ${t.to}`),
          `${uuid} taken by a shard's nova-compute (nova's log)`,
        ).to.deep.equal(byManage.some((n) => n.uuid === uuid) ? [] : [move]);
        expect(reporters.get(uuid), `who reported ${uuid}, in order`).to.deep.equal([
          novaHostOf.get(uuid),
          to,
        ]);
      }
    } finally {
      await watch.stop();
    }
  });

  it("the shard's nova-computes stopped and their services deleted through nova's API leave nothing of the test's in nova or placement", async () => {
    const api = await novaApi!;
    await stopSupervisors();
    for (const s of await ourServices(api)) await api.call("DELETE", `/os-services/${s.id}`, "2.53");
    expect(await ourServices(api)).to.deep.equal([]);
    expect(cloud.novaComputeNodes().filter((c) => nodes.includes(c.uuid) && !c.deleted)).to.deep.equal([]);
    const { resource_providers: rps } = await cloud.placementGet("/resource_providers");
    expect((rps as Array<{ uuid: string }>).filter((rp) => nodes.includes(rp.uuid))).to.deep.equal([]);
  });
});
