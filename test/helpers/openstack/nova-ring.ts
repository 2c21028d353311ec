import { setTimeout as sleep } from "node:timers/promises";
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { buildRing } from "../../../src/core/ring/legacy.js";
import { running } from "../processes.js";
import type { BootingCloud } from "./cloud.js";
import { NO_FUZZY_DELAY } from "./nova-compute.js";
import { readNovaLog, reportsIn, ringsOf } from "./nova-log.js";
import { Service } from "./service.js";
import { openstackBin } from "./venv.js";

/**
 * Node uuids nova's ring (tooz's, as shardbridge computes it) gives `perHost` to each of
 * `hosts`, so no host is left without nodes; whether nova agrees is what its records show.
 */
export function ringUuids(hosts: readonly string[], perHost: number): string[] {
  const ring = buildRing("tooz", hosts);
  const picked = new Map(hosts.map((h) => [h, [] as string[]]));
  while ([...picked.values()].some((u) => u.length < perHost)) {
    const uuid = randomUUID();
    const mine = picked.get(ring.memberOf(uuid)!)!;
    if (mine.length < perHost) mine.push(uuid);
  }
  return [...picked.values()].flat();
}

/**
 * nova's hash ring as nova 34 runs it without shards: one nova-compute per host, none with
 * `[ironic] shard`, every one managing its share of every node of the cloud's Ironic (the
 * driver's ring over the compute services that are up and have compute nodes), each
 * started directly (no supervisor), its own host and state folder, as on machines of their
 * own. What nova does is read from its log (each line carries its pid) and databases.
 */
export class NovaRing {
  private readonly services = new Map<string, Service>();

  constructor(
    private readonly cloud: BootingCloud,
    readonly hosts: readonly string[],
  ) {}

  /** nova-compute for `host` started (again): the cloud's nova.conf, no shard, Ironic given directly. */
  start(host: string): Service {
    const state = join(this.cloud.dir, host);
    mkdirSync(state, { recursive: true });
    const service = Service.start(
      host,
      openstackBin("nova-compute"),
      ["--config-file", this.cloud.novaConf],
      join(this.cloud.dir, `${host}.out`),
      {
        ...NO_FUZZY_DELAY,
        OS_DEFAULT__HOST: host,
        OS_IRONIC__ENDPOINT_OVERRIDE: this.cloud.ironic,
        OS_DEFAULT__STATE_PATH: state,
      },
    );
    this.services.set(host, service);
    return service;
  }

  pidOf(host: string): number {
    return this.services.get(host)!.pid;
  }

  /** The host whose nova-compute is (or was last) process `pid`. */
  hostOf(pid: number): string | undefined {
    return [...this.services].find(([, s]) => s.pid === pid)?.[0];
  }

  /** kill -9 of `host`'s nova-compute (its whole process group); until the kernel has it gone. */
  async kill(host: string): Promise<void> {
    const pid = this.pidOf(host);
    process.kill(-pid, "SIGKILL");
    while (running(pid)) await sleep(20);
  }

  /**
   * Every host up, every node's record made and the ring settled. The first nova-compute
   * alone makes every node's record (two making the same record at once would stop one of
   * them at start-up: a duplicate is fatal then); the others join it, and nova's ring
   * settles on its own (see `untilSettled`). When it settled (ms of the epoch).
   */
  async up(nodes: readonly string[], withinMs: number): Promise<number> {
    this.start(this.hosts[0]!);
    const deadline = performance.now() + withinMs;
    while (!nodes.every((uuid) => this.cloud.novaComputeNodes().some((c) => c.uuid === uuid && !c.deleted))) {
      if (performance.now() > deadline) throw new Error(`${this.hosts[0]} did not make every node's record`);
      await sleep(500);
    }
    const joined = Date.now();
    for (const host of this.hosts.slice(1)) this.start(host);
    const settledAt = await this.untilSettled(nodes, joined, deadline - performance.now());
    if (settledAt === null) throw new Error(`nova's ring did not settle within ${withinMs} ms`);
    return settledAt;
  }

  /**
   * Until nova's ring has settled since `since` (ms of the epoch): every running
   * nova-compute has rebuilt its ring with every host in it (nova rebuilds it at each
   * resource update, from the services that are up and have compute nodes), and since the
   * last of those rebuilds every node of `nodes` has been reported ("Final resource view")
   * by one nova-compute only, the one nova's database names as the node's host. When (ms
   * of the epoch), or null when not within `withinMs`.
   */
  async untilSettled(nodes: readonly string[], since: number, withinMs: number): Promise<number | null> {
    const deadline = performance.now() + withinMs;
    const all = [...this.hosts].sort().join();
    for (;;) {
      const log = readNovaLog(this.cloud.novaComputeLog);
      const pids = this.hosts.map((h) => this.pidOf(h));
      const full = pids.map(
        (pid) => ringsOf(log, pid).find((r) => r.at >= since && r.members.join() === all)?.at,
      );
      if (full.every((at) => at !== undefined)) {
        const from = Math.max(...full);
        const reports = reportsIn(log, from);
        const records = this.cloud.novaComputeNodes().filter((c) => !c.deleted);
        const settled = nodes.every((uuid) => {
          const reporters = new Set(reports.filter((r) => r.uuid === uuid).map((r) => r.pid));
          const mine = records.filter((c) => c.uuid === uuid);
          return (
            reporters.size === 1 && mine.length === 1 && mine[0]!.host === this.hostOf([...reporters][0]!)
          );
        });
        if (settled) return Date.now();
      }
      if (performance.now() > deadline) return null;
      await sleep(500);
    }
  }

  /** Every nova-compute stopped (TERM, then KILL). */
  async stop(): Promise<void> {
    for (const service of this.services.values()) await service.stop();
  }
}
