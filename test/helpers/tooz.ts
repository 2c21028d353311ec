import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const PEERS = fileURLToPath(new URL("../../../shared/peers/", import.meta.url));
export const TOOZ_RING_SCRIPT = join(PEERS, "tooz_ring.py");
export const RING_VECTORS = join(PEERS, "ring-vectors.json");

/** Why the real tooz cannot be run here, or null when it can. */
export function toozUnavailable(): string | null {
  if (!existsSync(TOOZ_RING_SCRIPT)) return "../shared/peers/tooz_ring.py not found";
  const probe = spawnSync("/usr/bin/python3", ["-c", "import tooz.hashring"], { encoding: "utf8" });
  if (probe.status !== 0) return "python3-tooz is not installed (apt-get install python3-tooz)";
  return null;
}

/** The real tooz's mapping (../shared/peers/tooz_ring.py on the Debian python3). */
export function toozMapping(request: {
  hosts: string[];
  nodes: string[];
  partitions?: number;
  replicas?: number;
}): Record<string, string | string[]> {
  const run = spawnSync("/usr/bin/python3", [TOOZ_RING_SCRIPT], {
    input: JSON.stringify(request),
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`tooz_ring.py failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as Record<string, string | string[]>;
}
