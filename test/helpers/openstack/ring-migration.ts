import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { PlanFile } from "../../../src/tools/migrate/plan-file.js";
import type { AgentProcess } from "../agent-process.js";
import { startBridge, type BridgeProcess } from "../bridge-process.js";
import { runShardbridge } from "../cli.js";
import type { BootingCloud } from "./cloud.js";
import { NO_FUZZY_DELAY, superviseNovaCompute } from "./nova-compute.js";
import { readNovaLog, updatedEmpty } from "./nova-log.js";

/** The compute API's version of `openstack compute service set --down` (2.11) and of deleting a service by id (2.53). */
const FORCE_DOWN_VERSION = "2.11";
const SERVICES_VERSION = "2.53";

/** A command `migrate plan` printed for nova's side: `nova-manage db ironic_compute_node_move …`. */
const NOVA_MANAGE_MOVE =
  /nova-manage (db ironic_compute_node_move --ironic-node-uuid \S+ --destination-host \S+)/g;

/**
 * The migration from nova's ring to shards as docs/OPERATIONS.md gives it, on a booting
 * cloud whose nodes some nova-computes without a shard serve: a bridge fronting the cloud's
 * Ironic, the inventory synced and each deployed node's instance host told to the bridge
 * (as an operator reads it from the compute API), then each step run as printed. Each step
 * is a method, so a test can look at nova's records between them.
 */
export class RingMigration {
  readonly supervisors: AgentProcess[] = [];
  plan: PlanFile | null = null;
  /** what `migrate plan` printed: the steps an operator follows */
  planText = "";
  private readonly planPath: string;

  private constructor(
    private readonly cloud: BootingCloud,
    readonly bridge: BridgeProcess,
    readonly ringHosts: readonly string[],
  ) {
    this.planPath = join(cloud.dir, `ring-migration-${process.pid}.json`);
  }

  /** The bridge (agents: the ring's hosts), Ironic's nodes synced into it. */
  static async start(cloud: BootingCloud, ringHosts: readonly string[]): Promise<RingMigration> {
    const bridge = await startBridge({
      shards: [],
      agents: [...ringHosts],
      env: cloud.bridgeEnv,
      args: ["--ironic", cloud.ironic],
    });
    const migration = new RingMigration(cloud, bridge, ringHosts);
    try {
      const sync = await migration.shardbridge(["ironic-sync", "--ironic", cloud.ironic]);
      if (sync.status !== 0) throw new Error(`ironic-sync exited ${sync.status}: ${sync.stderr}`);
    } catch (error) {
      await bridge.stop();
      throw error;
    }
    return migration;
  }

  /** A shardbridge command against the bridge, as its admin; Ironic called with `env`'s credentials. */
  shardbridge(args: string[], env: Record<string, string> = this.cloud.bridgeEnv) {
    return runShardbridge(
      [...args, "--bridge", this.bridge.url, "--token", this.bridge.tokenFor("admin")],
      env,
    );
  }

  /**
   * Tell the bridge each deployed node's instance host (Ironic knows the instance, not
   * nova's host), as docs/OPERATIONS.md asks: `PATCH /v1/nodes/{uuid}`.
   */
  async tellInstanceHosts(hostOfNode: ReadonlyMap<string, string>): Promise<void> {
    for (const [uuid, host] of hostOfNode) {
      const res = await fetch(`${this.bridge.url}/v1/nodes/${uuid}`, {
        method: "PATCH",
        headers: {
          authorization: `Bearer ${this.bridge.tokenFor("admin")}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ instance_host: host }),
      });
      if (!res.ok) throw new Error(`PATCH /v1/nodes/${uuid}: ${res.status} ${await res.text()}`);
    }
  }

  /** `migrate plan --agents …`: the plan file, and what it printed. */
  async makePlan(): Promise<PlanFile> {
    const made = await this.shardbridge([
      ...["migrate", "plan", "--agents", this.ringHosts.join(","), "--out", this.planPath],
    ]);
    if (made.status !== 0) throw new Error(`migrate plan exited ${made.status}: ${made.stderr}`);
    this.planText = made.stdout;
    this.plan = JSON.parse(readFileSync(this.planPath, "utf8")) as PlanFile;
    return this.plan;
  }

  /**
   * `migrate prepare|apply|verify plan.json`; apply and verify with `--ironic`, as the
   * cloud's system admin (Ironic lets only an admin write shard keys).
   */
  step(step: "prepare" | "apply" | "verify") {
    if (step === "prepare") return this.shardbridge(["migrate", step, this.planPath]);
    return this.shardbridge(
      ["migrate", step, this.planPath, "--ironic", this.cloud.ironic],
      this.cloud.keystone.adminOpenrc("system"),
    );
  }

  /**
   * One `run`-supervised nova-compute per planned shard, on its planned agent's host;
   * until each has been through one resource update (nothing in its shard yet): the
   * nova-compute pid of each service's host.
   */
  async startShardComputes(withinMs: number): Promise<Map<string, number>> {
    const services = this.plan!.nova.services;
    const started = services.map((s) => {
      const supervisor = superviseNovaCompute(this.cloud, this.bridge, s.agent, s.shard, NO_FUZZY_DELAY);
      this.supervisors.push(supervisor);
      return supervisor;
    });
    const pids = new Map<string, number>();
    await Promise.all(
      started.map(async (supervisor, i) => {
        const e = await supervisor.waitFor((ev) => ev.ev === "child-started", withinMs);
        pids.set(services[i]!.host, Number(e.pid));
      }),
    );
    const deadline = performance.now() + withinMs;
    const updated = () => {
      const log = readNovaLog(this.cloud.novaComputeLog);
      return [...pids.values()].every((pid) => updatedEmpty(log, pid));
    };
    while (!updated()) {
      if (performance.now() > deadline)
        throw new Error(`the shards' nova-computes not through a resource update within ${withinMs} ms`);
      await new Promise((r) => setTimeout(r, 500));
    }
    return pids;
  }

  /** The ring's services forced down, as `openstack --os-compute-api-version 2.11 compute service set --down HOST nova-compute` does. */
  async forceDownRing(): Promise<void> {
    for (const host of this.plan!.nova.old_services)
      await this.cloud.compute.call("PUT", "/os-services/force-down", FORCE_DOWN_VERSION, {
        host,
        binary: "nova-compute",
        forced_down: true,
      });
  }

  /**
   * The `nova-manage db ironic_compute_node_move` commands the plan printed, run as printed,
   * side by side (each moves one node's record and its instance; nova-manage's own start
   * is most of each): their arguments.
   */
  async runPrintedMoves(): Promise<string[][]> {
    const moves = [...this.planText.matchAll(NOVA_MANAGE_MOVE)].map((m) => m[1]!.split(" "));
    await Promise.all(moves.map((args) => this.cloud.novaManage(...args)));
    return moves;
  }

  /** The ring's compute services deleted through the compute API (what `openstack compute service delete` calls). */
  async deleteRingServices(): Promise<void> {
    for (const s of await this.services(this.ringHosts))
      await this.cloud.compute.call("DELETE", `/os-services/${s.id}`, SERVICES_VERSION);
  }

  /** The compute services of `hosts` the compute API lists. */
  async services(
    hosts: readonly string[],
  ): Promise<Array<{ id: string; host: string; forced_down: boolean }>> {
    const { services } = await this.cloud.compute.call(
      "GET",
      "/os-services?binary=nova-compute",
      SERVICES_VERSION,
    );
    return (services as Array<{ id: string; host: string; forced_down: boolean }>).filter((s) =>
      hosts.includes(s.host),
    );
  }

  /** The supervisors killed (their nova-computes follow), the bridge stopped. */
  async stop(): Promise<void> {
    for (const s of this.supervisors) await s.kill();
    await this.bridge.stop();
  }
}
