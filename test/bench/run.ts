/**
 * `make bench`: every benchmark, each printing its numbers beside a baseline measured in
 * the same run. Nothing here asserts a time; the numbers go in notes and docs/PERFORMANCE.md.
 */
import { bridgeBench } from "./bridge.bench.js";
import { inspectorBench } from "./inspector.bench.js";
import { leaseBench } from "./lease.bench.js";
import { ringBench } from "./ring.bench.js";
import { simBench } from "./sim.bench.js";

const benches: Record<string, () => Promise<void>> = {
  lease: leaseBench,
  bridge: bridgeBench,
  http: async () => (await import("./http.bench.js")).httpBench(),
  stall: async () => (await import("./stall.bench.js")).stallBench(),
  inspector: inspectorBench,
  fenced: async () => (await import("./fenced.bench.js")).fencedBench(),
  "ironic-delivery": async () => (await import("./ironic-delivery.bench.js")).ironicDeliveryBench(),
  failover: async () => (await import("./failover.bench.js")).failoverBench(),
  ha: async () => (await import("./ha.bench.js")).haBench(),
  nova: async () => (await import("./nova.bench.js")).novaBench(),
  // The side-by-side table of nova's ring and shardbridge run alone (`make bench nova` prints it too).
  "nova-ring": async () => (await import("./nova-ring.bench.js")).novaRingBench(),
  // A reboot sent during kill -9's outage, to done (`make bench nova` runs it too).
  "nova-outage": async () => (await import("./nova-outage.bench.js")).novaOutageBench(),
  // nova-compute's start-up through the fenced endpoint and direct (`make bench nova` runs it too).
  "nova-fence": async () => (await import("./nova-fence.bench.js")).novaFenceBench(),
  ring: ringBench,
  scale: async () => (await import("./scale.bench.js")).scaleBench(),
  sim: simBench,
  definitions: async () => (await import("./definitions.bench.js")).definitionsBench(),
  // The same fleet of leases against shardbridge, etcd and a Redis lock (#48).
  peers: async () => (await import("./peers.bench.js")).peersBench(),
};
const only = process.argv.slice(2);

for (const [name, bench] of Object.entries(benches)) {
  if (only.length > 0 && !only.includes(name)) continue;
  await bench();
}
process.exit(0);
