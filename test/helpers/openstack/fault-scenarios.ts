import type { AgentProcess } from "../agent-process.js";
import type { BridgeProcess } from "../bridge-process.js";
import { NOVA_UPDATE_INTERVAL_S, type BootingCloud } from "./cloud.js";
import type { FaultSubject, FaultWindows } from "./fault-column.js";
import { Instances, settled } from "./instances.js";
import { enrollAvailable, powerOn } from "./nodes.js";
import { resendingShard, type SupervisedShard } from "./nova-compute.js";
import { NovaRing, ringUuids } from "./nova-ring.js";

/**
 * The cloud's nova.conf (cloud.ts): a compute service not heard from for longer is down
 * (nova's `service_is_up`), and nova's ring leaves it out only then. nova's default.
 */
export const SERVICE_DOWN_TIME_S = 60;
/** nova's ring: three nova-computes without `[ironic] shard`. */
export const RING_HOSTS = ["ring-a", "ring-b", "ring-c"];
/** Nodes per ring host (six in all, as the shardbridge side has). */
const PER_HOST = 2;
const SERVERS = ["vm-0", "vm-1", "vm-2", "vm-3"];
/** The shardbridge side: one shard, its lease's TTL, two hosts under `run`. */
const SHARD = "rack-f";
const TTL_MS = 2000;

/**
 * The windows of the fault, from what nova claims, not this machine's speed. The window:
 * the killed host's last report is at most report_interval (10 s) old when it dies, nova
 * counts it down service_down_time after that report, and the others rebuild their ring at
 * their next resource update (every NOVA_UPDATE_INTERVAL_S) and take its nodes in it: so
 * service_down_time, two update intervals and 20 s for the updates themselves. Settling
 * after the return: a nova-compute's start with its instances (under a minute here) and two
 * update intervals for every ring to have it, bounded at 180 s. A user whose reboot did
 * nothing asks again every 30 s: longer than shardbridge's failover and resend (one TTL,
 * nova-compute's start, a poll), so a retry there would be a second reboot of the user's
 * own, not a stand-in for the resend.
 */
export const FAULT_WINDOWS: FaultWindows = {
  windowMs: (SERVICE_DOWN_TIME_S + 2 * NOVA_UPDATE_INTERVAL_S) * 1000 + 20_000,
  retryEveryMs: 30_000,
  settleWithinMs: 180_000,
  quietMs: NOVA_UPDATE_INTERVAL_S * 1000,
};

/** A fleet with four servers, and what the fault is done to. */
export interface FaultScenario {
  nodes: string[];
  servers: string[];
  /** the server rebooted through the fault, and its node */
  target: { server: string; node: string };
  /** the host that is killed and comes back */
  killed: string;
  subject: FaultSubject;
  /** what the set-up took, to print */
  summary: string;
  stop(): Promise<void>;
}

/** Six nodes (`shard`: in that shard, else none), powered on, a baremetal flavor: the flavor's id. */
async function sixNodes(
  cloud: BootingCloud,
  prefix: string,
  shard: string | null,
  given?: readonly string[],
): Promise<{ nodes: string[]; flavor: string }> {
  const nodes = await enrollAvailable(
    cloud,
    Array.from({ length: 6 }, (_, i) => `${prefix}-${i}`),
    shard,
    given,
  );
  await powerOn(cloud, nodes);
  return { nodes, flavor: await new Instances(cloud).baremetalFlavor() };
}

/**
 * nova's ring with instances: three nova-computes without a shard, two nodes each by nova's
 * ring, four servers. Three are placed by the scheduler; the fourth is asked (by node, 2.74)
 * onto a free node of the host with the fewest, so that every run has the same spread, two,
 * one and one: the host killed is one with one instance and one node without, so both what
 * nova does with an instance's node and with a free node show. Its instance is rebooted.
 */
export async function ringScenario(cloud: BootingCloud): Promise<FaultScenario> {
  const began = performance.now();
  const ring = new NovaRing(cloud, RING_HOSTS);
  try {
    const { nodes, flavor } = await sixNodes(cloud, "bm-r", null, ringUuids(RING_HOSTS, PER_HOST));
    await ring.up(nodes, 240_000);
    const upMs = performance.now() - began;
    // The hosts mapped to the cell, as an operator does for new computes (the scheduler and
    // the compute API find a service by host through its mapping).
    await cloud.discoverHosts();
    const instances = new Instances(cloud);
    const placed = await instances.bootSerially(SERVERS.slice(0, 3), flavor);
    const hostOfNode = new Map(cloud.novaComputeNodes().map((c) => [c.uuid, c.host]));
    const used = new Set(cloud.novaInstances().flatMap((i) => (i.deleted ? [] : [i.node])));
    const load = (host: string) => [...used].filter((n) => n !== null && hostOfNode.get(n) === host).length;
    const emptiest = [...RING_HOSTS].sort((a, b) => load(a) - load(b))[0]!;
    const free = nodes.find((n) => hostOfNode.get(n) === emptiest && !used.has(n))!;
    const fourth = await instances.boot(SERVERS[3]!, flavor, free);
    await instances.untilServer(fourth, "ACTIVE", settled("ACTIVE"));
    const servers = [...placed, fourth];
    const rows = cloud.novaInstances().filter((i) => servers.includes(i.uuid));
    const count = (host: string) => rows.filter((r) => r.host === host).length;
    const killed =
      RING_HOSTS.find((h) => count(h) === 1) ?? [...RING_HOSTS].sort((a, b) => count(b) - count(a))[0]!;
    const target = rows.find((r) => r.host === killed)!;
    const spread = RING_HOSTS.map((h) => `${h} ${count(h)}`).join(", ");
    return {
      nodes,
      servers,
      target: { server: target.uuid, node: target.node! },
      killed,
      subject: {
        kill: () => ring.kill(killed),
        restore: async () => void ring.start(killed),
        untilSettled: (since, withinMs) => ring.untilSettled(nodes, since, withinMs),
      },
      summary:
        `nova's ring of ${RING_HOSTS.length} nova-computes settled ${Math.round(upMs)} ms after the nodes' enrolment began; ` +
        `servers per host: ${spread}; killed: ${killed}`,
      stop: () => ring.stop(),
    };
  } catch (error) {
    await ring.stop();
    throw error;
  }
}

/**
 * The same under shardbridge: the six nodes in one shard, two `run --resend-preempted`
 * supervisors (host-a, host-b) as in nova-instances-run.test.ts, four servers on the
 * shard's host. The active supervisor is killed (its nova-compute follows by pdeathsig and its group); it comes back
 * as the standby. Its first server is the one rebooted.
 */
export async function shardScenario(cloud: BootingCloud): Promise<FaultScenario> {
  const { nodes, flavor } = await sixNodes(cloud, "bm-s", SHARD);
  let bridge: BridgeProcess | null = null;
  let shard: SupervisedShard | null = null;
  try {
    const made = await resendingShard(cloud, SHARD, nodes, TTL_MS);
    [bridge, shard] = [made.bridge, made.shard];
    const s = made.shard;
    const pair = await s.pair();
    let active: AgentProcess = pair.active;
    let standby: AgentProcess = pair.standby;
    await cloud.discoverHosts();
    const servers = await new Instances(cloud).bootSerially(SERVERS, flavor);
    const [first] = cloud.novaInstances().filter((i) => i.uuid === servers[0]);
    const killed = active.name;
    let takeover: Promise<{ pid: number }> | null = null;
    const b = made.bridge;
    return {
      nodes,
      servers,
      target: { server: first!.uuid, node: first!.node! },
      killed,
      subject: {
        kill: async () => {
          const killedAt = Date.now();
          active.signal("SIGKILL");
          takeover = s.takeover("kill -9", standby, killedAt);
          takeover.catch(() => undefined);
        },
        restore: async () => {
          // The standby took over (long before the window's end: one TTL and a start).
          await takeover!;
          const gone = active;
          await gone.exited();
          active = standby;
          standby = s.supervise(gone.name);
          await standby.waitFor((e) => e.ev === "standby", 30_000);
        },
        untilSettled: async (since, withinMs) => {
          const { pid } = await takeover!;
          return s.untilReported(pid, since, withinMs).catch(() => null);
        },
      },
      summary: `shardbridge: shard ${SHARD} of ${nodes.length} nodes, two run supervisors (TTL ${TTL_MS} ms); killed: the active one, ${killed}`,
      stop: async () => {
        await s.stopAll();
        await b.stop();
      },
    };
  } catch (error) {
    await shard?.stopAll();
    await bridge?.stop();
    throw error;
  }
}
