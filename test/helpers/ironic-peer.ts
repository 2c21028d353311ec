import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./redis-server.js";

/** The real Ironic API from ../shared/peers (installed from Debian on first use). */
const PEERS = fileURLToPath(new URL("../../../shared/peers/", import.meta.url));

export function ironicPeersAvailable(): boolean {
  return existsSync(join(PEERS, "ironic-up.sh"));
}

export interface IronicPeer {
  endpoint: string;
  stop(): void;
}

/** Start a private Ironic (API + conductor, sqlite, noauth, fake-hardware) on free ports. */
export async function startIronic(): Promise<IronicPeer> {
  const state = mkdtempSync(join(tmpdir(), "sb-ironic-"));
  const env = {
    ...process.env,
    IRONIC_PORT: String(await freePort()),
    INSPECTOR_PORT: String(await freePort()),
  };
  const up = spawnSync("bash", [join(PEERS, "ironic-up.sh"), state], {
    env,
    encoding: "utf8",
    timeout: 300_000,
  });
  if (up.status !== 0) throw new Error(`ironic-up.sh failed (${up.status}): ${up.stderr.slice(-2000)}`);
  return {
    endpoint: up.stdout.trim().split("\n").pop()!,
    stop: () => {
      spawnSync("bash", [join(PEERS, "ironic-down.sh"), state], { encoding: "utf8", timeout: 60_000 });
      rmSync(state, { recursive: true, force: true });
    },
  };
}

/** Create a fake-hardware node in Ironic (API 1.82), answering its uuid. */
export async function createIronicNode(
  endpoint: string,
  fields: { name: string; shard?: string },
): Promise<string> {
  const res = await fetch(`${endpoint}/v1/nodes`, {
    method: "POST",
    headers: { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" },
    body: JSON.stringify({ driver: "fake-hardware", ...fields }),
  });
  if (res.status !== 201) throw new Error(`creating node ${fields.name}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { uuid: string }).uuid;
}
