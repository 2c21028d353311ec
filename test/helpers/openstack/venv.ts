import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPT = fileURLToPath(new URL("../../../scripts/openstack-venv.sh", import.meta.url));

/**
 * The folder of the OpenStack virtual environment (scripts/openstack-venv.sh, which
 * `make test` runs first), or an error that says how to build it.
 */
export function openstackVenv(): string {
  const asked = spawnSync("bash", [SCRIPT, "--path"], { encoding: "utf8" });
  if (asked.status !== 0) throw new Error(`scripts/openstack-venv.sh --path: ${asked.stderr}`);
  const venv = asked.stdout.trim();
  if (!existsSync(join(venv, ".complete")))
    throw new Error(`no OpenStack venv at ${venv}: run scripts/openstack-venv.sh (make test does)`);
  return venv;
}

/** A program of the venv (nova-compute, ironic, placement-manage, ...). */
export function openstackBin(name: string): string {
  return join(openstackVenv(), "bin", name);
}
