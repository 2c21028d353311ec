import { spawnSync } from "node:child_process";
import { randomUuid, seededRandom } from "../../src/runtime/random.js";
import { compareEvents } from "../../src/core/ring/compare.js";
import { buildRing } from "../../src/core/ring/legacy.js";
import { ToozRing } from "../../src/core/ring/tooz.js";
import { toozUnavailable } from "../helpers/tooz.js";
import { printTable } from "./stats.js";

/**
 * Ring build and lookup, 100,000 node UUIDs over 1,000 members: our tooz ring beside the
 * real python3 tooz (timed inside Python, on the same input) and beside the `hashring`
 * package (ketama). Then the headline: nodes moved per 1,000 nodes when one of 10 agents
 * fails, comes back, or one is added, nova's ring against shards with a standby.
 */
const NODES = Number(process.env.BENCH_RING_NODES ?? 100_000);
const MEMBERS = Number(process.env.BENCH_RING_MEMBERS ?? 1000);

const PYTHON_TIMING = `
import json, sys, time
from tooz import hashring
req = json.load(sys.stdin)
t0 = time.perf_counter()
ring = hashring.HashRing(set(req["hosts"]), partitions=32)
t1 = time.perf_counter()
first = None
for n in req["nodes"]:
    got = ring.get_nodes(n.encode("utf-8"))
    if first is None: first = next(iter(got))
t2 = time.perf_counter()
print(json.dumps({"build_s": t1 - t0, "lookup_s": t2 - t1, "first": first}))
`;

function time<T>(fn: () => T): { value: T; s: number } {
  const started = performance.now();
  const value = fn();
  return { value, s: (performance.now() - started) / 1000 };
}

export async function ringBench(): Promise<void> {
  const random = seededRandom(2026);
  const nodes = Array.from({ length: NODES }, () => randomUuid(random));
  const hosts = Array.from({ length: MEMBERS }, (_, i) => `compute-${i}`);

  const ours = time(() => new ToozRing(hosts));
  const oursLookup = time(() => {
    let placed = 0;
    for (const n of nodes) if (ours.value.memberOf(n) !== null) placed++;
    return placed;
  });
  const ketama = time(() => buildRing("ketama", hosts));
  const ketamaLookup = time(() => {
    let placed = 0;
    for (const n of nodes) if (ketama.value.memberOf(n) !== null) placed++;
    return placed;
  });
  /** A table row: build and lookup seconds, and each as a ratio to ours. */
  const row = (name: string, buildS: number, lookupS: number) => [
    name,
    buildS * 1000,
    NODES / lookupS,
    (buildS / ours.s).toFixed(2),
    (lookupS / oursLookup.s).toFixed(2),
  ];

  const rows = [row("shardbridge tooz ring (Node)", ours.s, oursLookup.s)];
  const why = toozUnavailable();
  if (why === null) {
    const run = spawnSync("/usr/bin/python3", ["-c", PYTHON_TIMING], {
      input: JSON.stringify({ hosts, nodes }),
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    if (run.status !== 0) throw new Error(`python3 tooz timing failed: ${run.stderr}`);
    const py = JSON.parse(run.stdout) as { build_s: number; lookup_s: number; first: string };
    if (py.first !== ours.value.memberOf(nodes[0]!))
      throw new Error("python tooz and ours disagree on node 0");
    rows.push(row("python3 tooz 3.1 (same input)", py.build_s, py.lookup_s));
  } else {
    process.stdout.write(`\n(${why}: the python3 tooz column is skipped)\n`);
  }
  rows.push(row("hashring package (ketama)", ketama.s, ketamaLookup.s));
  printTable(
    `Ring: build over ${MEMBERS} members, look up ${NODES.toLocaleString("en-US")} node UUIDs (time ratio: other / ours, >1 = ours faster)`,
    ["ring", "build ms", "lookups/s", "build ratio", "lookup ratio"],
    rows,
  );

  // The headline: one of 10 agents fails (each in turn), comes back, one is added.
  const agents = Array.from({ length: 10 }, (_, i) => `compute-${i}`);
  const fleet = nodes.map((uuid) => ({ uuid, shard: null, instance_host: null }));
  const comparison = compareEvents(fleet, agents, { standbys: 1 });
  const per1000 = (n: number) => (n * 1000) / NODES;
  const summary = (event: "lost" | "back" | "added") => {
    const events = comparison.events.filter((e) => e.event === event);
    const mean = (pick: (e: (typeof events)[number]) => number) =>
      events.reduce((sum, e) => sum + pick(e), 0) / events.length;
    return [
      mean((e) => per1000(e.ring.moved)),
      mean((e) => e.ring.agentsGaining),
      mean((e) => per1000(e.shards.moved)),
      mean((e) => e.shards.agentsGaining),
    ];
  };
  printTable(
    `Nodes moved per 1,000 nodes, 10 agents (${NODES.toLocaleString("en-US")} nodes; mean over each agent; shards: migrate plan's layout, 1 standby)`,
    ["event", "ring: moved", "ring: agents taking nodes", "shards: moved", "shards: agents taking nodes"],
    [
      ["one agent fails", ...summary("lost")],
      ["it comes back", ...summary("back")],
      ["an 11th agent is added", ...summary("added")],
    ],
  );
}
