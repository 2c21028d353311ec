import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const UNITS = [
  "examples/systemd/shardbridge.service",
  "examples/nova-compute/shardbridge-nova-compute@.service",
];

const haveSystemdAnalyze = () => spawnSync("systemd-analyze", ["--version"]).status === 0;

/**
 * The files operators deploy from: the systemd units pass `systemd-analyze verify` (every
 * directive known, every value valid) with their ExecStart pointed at programs this
 * machine has, and the bridge's unit keeps its hardening (`systemd-analyze security`).
 */
describe("Deployment files", function () {
  this.timeout(60_000);
  let dir: string;
  before(function () {
    if (!haveSystemdAnalyze()) {
      console.log("      (systemd-analyze not here: the units are not checked)");
      return this.skip();
    }
    dir = mkdtempSync(join(tmpdir(), "sb-units-"));
  });
  after(() => dir && rmSync(dir, { recursive: true, force: true }));

  /** The unit with its programs replaced by ones that exist here; everything else as shipped. */
  const runnable = (unit: string): string => {
    const text = readFileSync(join(ROOT, unit), "utf8")
      .replaceAll("/usr/bin/shardbridge", `${process.execPath} ${ROOT}dist/cli.js`)
      .replaceAll("/usr/bin/nova-compute", "/bin/true");
    const file = join(dir, unit.split("/").pop()!);
    writeFileSync(file, text);
    return file;
  };

  for (const unit of UNITS)
    it(`${unit} passes systemd-analyze verify`, () => {
      const run = spawnSync("systemd-analyze", ["verify", runnable(unit)], { encoding: "utf8", cwd: dir });
      expect(run.stderr.trim(), run.stderr).to.equal("");
      expect(run.status).to.equal(0);
    });

  it("the bridge's unit is hardened: systemd-analyze security rates its exposure 2.0 or less", () => {
    const run = spawnSync("systemd-analyze", ["security", "--offline=yes", runnable(UNITS[0]!)], {
      encoding: "utf8",
      cwd: dir,
    });
    const exposure = Number(/Overall exposure level for \S+: ([\d.]+)/.exec(run.stdout)?.[1]);
    console.log(`      exposure ${exposure} (0 best, 10 worst)`);
    expect(exposure, run.stdout.slice(-500)).to.be.at.most(2.0);
  });
});
