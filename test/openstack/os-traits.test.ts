import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { OS_TRAITS_VERSION, STANDARD_TRAIT_NAMES } from "../../src/core/traits/os-traits.js";
import { TraitName } from "../../src/core/traits/names.js";
import { openstackBin } from "../helpers/openstack/venv.js";

/*
 * The standard trait names the bridge takes are the os-traits of the nova and Ironic the
 * tests run (the pin in test/openstack/requirements.txt), generated into a module; an
 * older Ironic's are a subset of them (Debian's 2.9.0, Ironic 21.4's). A pin moved without
 * the module regenerated, or a newer os-traits that dropped a name, fails here.
 */

const SCRIPT = fileURLToPath(new URL("../../scripts/os-traits.py", import.meta.url));
const MODULE = new URL("../../src/core/traits/os-traits.ts", import.meta.url);

function python(program: string, args: string[]): string {
  const run = spawnSync(program, args, { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`${program} ${args.join(" ")}: ${run.stderr}`);
  return run.stdout;
}

describe("os-traits: the standard trait names the bridge takes", () => {
  it("are the pinned os-traits' names, as scripts/os-traits.py writes them", () => {
    const pinned = readFileSync(fileURLToPath(new URL("requirements.txt", import.meta.url)), "utf8");
    expect(pinned).to.include(`os-traits==${OS_TRAITS_VERSION}\n`);
    expect(python(openstackBin("python"), [SCRIPT])).to.equal(readFileSync(MODULE, "utf8"));
  });

  it("hold every name of Debian's os-traits (Ironic 21.4's), and the ones Ironic took since", () => {
    const debian = JSON.parse(
      python("/usr/bin/python3", ["-c", "import json, os_traits; print(json.dumps(os_traits.get_traits()))"]),
    ) as string[];
    expect(debian.length).to.be.greaterThan(300);
    const known = new Set(STANDARD_TRAIT_NAMES);
    expect(debian.filter((name) => !known.has(name))).to.deep.equal([]);
    // Added after 2.9.0: a CPU flag's trait Ironic 39 takes and inspection rules may name.
    expect(debian).to.not.include("HW_CPU_X86_AMXTILE");
    expect(TraitName.safeParse("HW_CPU_X86_AMXTILE").success).to.equal(true);
    expect(TraitName.safeParse("HW_CPU_X86_NOT_A_TRAIT").success).to.equal(false);
  });
});
