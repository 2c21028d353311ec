import { RING_REBUILD_MS, SERVICE_DOWN_TIME_MS } from "../../core/ring/membership.js";
import { ToozRing } from "../../core/ring/tooz.js";
import { Coverage } from "./coverage.js";
import type { FleetLayout } from "./fleet.js";
import type { SimHost } from "./host.js";
import type { EventQueue } from "./queue.js";

const MS = 1000;
/** nova-compute reports its service state every 10 s (`report_interval`). */
export const NOVA_REPORT_INTERVAL_MS = 10_000;

export interface LegacyModeResult {
  coverage: Coverage;
  /** spells during which an agent managed any nodes, per agent, for the timeline chart */
  spells: Array<{ agent: number; fromUs: number; toUs: number | null; nodes: number }>;
}

/** What the timeline can do to the legacy side. */
export interface LegacyFaults {
  crash(host: SimHost): void;
  /** the host's links to the database go down (or up) */
  cut(host: SimHost, to: boolean, from: boolean): void;
  start(host: SimHost): void;
  pause(host: SimHost, untilUs: number): void;
  clockRate(host: SimHost, rate: number): void;
}

/**
 * nova's ironic driver without shards: every agent heartbeats every 10 s; every 60 s (and
 * at start) it rebuilds its ring from the services that heartbeated within
 * service_down_time (60 s), plus itself, and manages the nodes its ring gives it until
 * the next rebuild. Nothing fences: a frozen or cut-off agent keeps acting on its last
 * ring. A node's manager set is exactly the agents whose current ring gives it to them.
 * Cut off from the database (here: from Redis), an agent's heartbeats are lost and its
 * rebuild fails, so it keeps its old ring. A Redis restart is not nova's concern.
 */
export function runLegacyMode(
  layout: FleetLayout,
  queue: EventQueue,
  random: () => number,
  hosts: SimHost[],
  latencyUs: number,
): { result: LegacyModeResult; faults: LegacyFaults } {
  const agents = layout.agents.map((a) => a.toLowerCase());
  const indexOf = new Map(agents.map((a, i) => [a, i]));
  const ring = new ToozRing(agents);
  const nodeCount = layout.nodes.length;
  // The ring of every agent, all up: base owners. A ring missing the agents in D differs
  // only for the nodes those agents own, found with tooz's ignore (the same walk as a
  // ring rebuilt without them).
  const baseOwner = new Int32Array(nodeCount);
  const baseNodes: number[][] = agents.map(() => []);
  for (let n = 0; n < nodeCount; n++) {
    const owner = indexOf.get(ring.memberOf(layout.nodes[n]!)!)!;
    baseOwner[n] = owner;
    baseNodes[owner]!.push(n);
  }
  /** down set key -> node -> new owner, for the nodes of down agents */
  const moved = new Map<string, Map<number, number>>();
  const movedFor = (down: number[]): Map<number, number> => {
    const key = down.join(",");
    let map = moved.get(key);
    if (map === undefined) {
      map = new Map();
      const ignore = down.map((d) => agents[d]!);
      for (const d of down)
        for (const n of baseNodes[d]!) {
          const owner = ring.lookup(layout.nodes[n]!, { ignore })[0];
          if (owner !== undefined) map.set(n, indexOf.get(owner)!);
        }
      if (moved.size > 1000) moved.delete(moved.keys().next().value!);
      moved.set(key, map);
    }
    return map;
  };

  const coverage = new Coverage(new Int32Array(nodeCount).fill(1), 0);
  const result: LegacyModeResult = { coverage, spells: [] };
  const lastSeenUs = new Float64Array(hosts.length).fill(0);
  /** the nodes each agent manages now */
  const managed: Array<Set<number>> = hosts.map(() => new Set());
  const openSpell: Array<LegacyModeResult["spells"][number] | null> = hosts.map(() => null);
  /**
   * Agents whose heartbeats may have stopped: crashed, frozen, cut off or with a slowed
   * clock at some point. Only they can be down; the others heartbeat every 10 s.
   */
  const quiet = new Set<number>();
  /** the down set each agent's current ring was built from ("" none); null: it has no ring */
  const ringOf: Array<string | null> = hosts.map(() => null);
  const downUs = SERVICE_DOWN_TIME_MS * MS;

  const setManaged = (agent: number, next: Set<number>) => {
    const now = managed[agent]!;
    for (const n of now) if (!next.has(n)) coverage.remove(n, queue.now);
    for (const n of next) if (!now.has(n)) coverage.add(n, agent, queue.now);
    managed[agent] = next;
    const open = openSpell[agent] ?? null;
    if (open !== null && (next.size === 0 || next.size !== open.nodes)) {
      open.toUs = queue.now;
      openSpell[agent] = null;
    }
    if (next.size > 0 && openSpell[agent] === null) {
      const spell = { agent, fromUs: queue.now, toUs: null, nodes: next.size };
      openSpell[agent] = spell;
      result.spells.push(spell);
    }
  };

  /** nova's _refresh_hash_ring: live services plus itself. */
  const rebuild = (host: SimHost) => {
    if (host.cutTo || host.cutFrom) return; // cannot read the service list: keep the old ring
    const readAt = queue.now + latencyUs;
    const down: number[] = [];
    for (const a of quiet) if (a !== host.index && readAt - lastSeenUs[a]! > downUs) down.push(a);
    down.sort((x, y) => x - y);
    // The same members as last time: the same ring, the same nodes.
    const key = down.join(",");
    if (ringOf[host.index] === key) return;
    ringOf[host.index] = key;
    const mine = new Set<number>(baseNodes[host.index]);
    if (down.length > 0) for (const [n, owner] of movedFor(down)) if (owner === host.index) mine.add(n);
    setManaged(host.index, mine);
  };

  const beatUs = NOVA_REPORT_INTERVAL_MS * MS;
  /**
   * The heartbeats of an agent that is not quiet change nothing anyone reads (a rebuild
   * looks only at quiet agents): for it only the next one's time is kept, and its beats
   * are played, in order and with the same arithmetic, when it turns quiet. A day of a
   * thousand agents saves eight million events. NaN: the beats run as events.
   */
  const pendingBeatUs = new Float64Array(hosts.length).fill(NaN);

  // A heartbeat is recorded when sent, stamped with its arrival: a rebuild reads the
  // service list as of its own read's arrival, so it sees exactly the heartbeats that
  // arrived by then (all messages take the same time).
  const heartbeat = (host: SimHost) => {
    if (!host.cutTo) lastSeenUs[host.index] = Math.max(lastSeenUs[host.index]!, queue.now + latencyUs);
    else quiet.add(host.index);
    beatAfter(host, beatUs);
  };
  const beatAfter = (host: SimHost, localDelayUs: number) => {
    const atUs = host.trueAt(host.local() + localDelayUs);
    if (quiet.has(host.index)) host.later(atUs, () => heartbeat(host));
    else pendingBeatUs[host.index] = atUs;
  };
  /** From now on the agent's heartbeats may stop: play the ones due before now, run the rest as events. */
  const turnQuiet = (host: SimHost) => {
    const i = host.index;
    if (quiet.has(i)) return;
    quiet.add(i);
    let atUs = pendingBeatUs[i]!;
    pendingBeatUs[i] = NaN;
    if (Number.isNaN(atUs)) return;
    for (; atUs < queue.now; atUs = host.trueAt(host.local(atUs) + beatUs))
      lastSeenUs[i] = Math.max(lastSeenUs[i]!, atUs + latencyUs);
    host.later(atUs, () => heartbeat(host));
  };

  const periodic = (host: SimHost) => {
    rebuild(host);
    host.afterLocal(RING_REBUILD_MS * MS, () => periodic(host));
  };

  /** A service starting: it reports, builds its ring at once, then runs its periodic tasks on its own phase. */
  const startAgent = (host: SimHost, warm: boolean) => {
    if (!warm) host.start();
    lastSeenUs[host.index] = queue.now;
    rebuild(host);
    beatAfter(host, random() * NOVA_REPORT_INTERVAL_MS * MS);
    host.afterLocal(random() * RING_REBUILD_MS * MS, () => periodic(host));
  };

  for (const host of hosts) startAgent(host, true);

  const faults: LegacyFaults = {
    crash: (h) => {
      turnQuiet(h);
      if (!h.up) return;
      setManaged(h.index, new Set());
      ringOf[h.index] = null;
      h.crash();
    },
    start: (h) => {
      turnQuiet(h);
      if (h.up) {
        setManaged(h.index, new Set());
        ringOf[h.index] = null;
        h.crash();
      }
      startAgent(h, false);
    },
    // A frozen nova-compute keeps believing in its ring; nothing fences it.
    cut: (h, to, from) => {
      if (to) turnQuiet(h); // its heartbeats no longer arrive
      h.cutTo = to;
      h.cutFrom = from;
    },
    pause: (h, untilUs) => {
      turnQuiet(h);
      h.freeze(untilUs);
    },
    clockRate: (h, rate) => {
      turnQuiet(h);
      h.setRate(rate);
    },
  };
  return { result, faults };
}
