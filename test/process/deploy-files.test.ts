import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { parseTokens } from "../../src/runtime/tokens-file.js";
import { parseOrThrow } from "../../src/core/validation.js";
import { DEFAULT_STOP_GRACE_MS } from "../../src/agent/run/supervisor.js";
import { ShardDefinitionFile } from "../../src/contracts/shards.js";
import { runShardbridge } from "../helpers/cli.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
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

/** Every document of a YAML file, parsed; a syntax error or warning fails. */
function yamlDocuments(file: string): any[] {
  return parseAllDocuments(readFileSync(join(ROOT, file), "utf8")).map((doc) => {
    expect([...doc.errors, ...doc.warnings].map(String), file).to.deep.equal([]);
    return doc.toJS();
  });
}

/** The options (`--name`) of a `run` command line, up to the `--` before the child. */
function runFlags(args: string[]): string[] {
  const from = args.indexOf("run");
  const to = args.indexOf("--", from);
  expect(from, args.join(" ")).to.be.at.least(0);
  expect(to, args.join(" ")).to.be.above(from);
  return args.slice(from + 1, to).filter((a) => a.startsWith("--"));
}

/** A flag's value in a command line. */
const flagValue = (args: string[], flag: string): string | undefined => args[args.indexOf(flag) + 1];

/** Each REPLACE_ME made a distinct token the bridge would take, so the file's shape can be parsed. */
const withTokens = (text: string): string =>
  text.replaceAll("REPLACE_ME", () => randomBytes(24).toString("hex"));

/**
 * The Kubernetes manifests and the kolla-ansible files: they parse, every flag and
 * SHARDBRIDGE_* variable they use is in `run --help` or `serve --help`, the shard's
 * definition, agents and tokens agree with the pods that serve it, and the grace period
 * outlasts what `run` needs to stop nova-compute and release.
 */
describe("Kubernetes and kolla-ansible examples", function () {
  this.timeout(60_000);
  let runHelp: string;
  let serveHelp: string;
  before(async () => {
    runHelp = (await runShardbridge(["run", "--help"])).stdout;
    serveHelp = (await runShardbridge(["serve", "--help"])).stdout;
    expect(runHelp).to.include("--tokens-file");
    expect(serveHelp).to.include("SHARDBRIDGE_STORE");
  });

  const K8S = "examples/kubernetes";
  let parsed: any[] | undefined;
  const docs = () =>
    (parsed ??= ["shardbridge.yaml", "nova-compute-ironic-rack-a.yaml", "secrets.yaml"].flatMap((f) =>
      yamlDocuments(`${K8S}/${f}`),
    ));
  const find = (kind: string, name: string) => {
    const found = docs().find((d) => d.kind === kind && d.metadata?.name === name);
    expect(found, `${kind} ${name}`).to.not.equal(undefined);
    return found;
  };

  it("every manifest parses and names its kind", () => {
    for (const doc of docs()) {
      expect(doc.apiVersion, JSON.stringify(doc).slice(0, 200)).to.be.a("string");
      expect(doc.kind).to.be.a("string");
      expect(doc.metadata.name).to.match(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
  });

  it("every Secret and ConfigMap a pod reads is in the examples, with the keys its paths name", () => {
    for (const workload of docs().filter((d) => d.kind === "Deployment" || d.kind === "StatefulSet")) {
      const pod = workload.spec.template.spec;
      const volumes = new Map<string, any>(pod.volumes.map((v: any) => [v.name, v]));
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const mounts = (container.volumeMounts ?? []).map((m: any) => ({
          ...m,
          volume: volumes.get(m.name),
        }));
        for (const mount of mounts) expect(mount.volume, `volume ${mount.name}`).to.not.equal(undefined);
        for (const env of container.env ?? []) {
          const ref = env.valueFrom?.secretKeyRef;
          if (ref) expect(find("Secret", ref.name).stringData).to.have.property(ref.key);
        }
        // A path the command reads from a mounted Secret or ConfigMap is one of its keys.
        const values = [
          ...(container.command ?? []),
          ...(container.args ?? []),
          ...(container.env ?? []).map((e: any) => e.value),
        ];
        for (const mount of mounts) {
          const source = mount.volume.secret
            ? find("Secret", mount.volume.secret.secretName).stringData
            : mount.volume.configMap
              ? find("ConfigMap", mount.volume.configMap.name).data
              : null;
          if (source === null) continue;
          for (const value of values) {
            if (typeof value !== "string" || !value.startsWith(`${mount.mountPath}/`)) continue;
            expect(source, `${value} in ${mount.name}`).to.have.property(
              value.slice(mount.mountPath.length + 1),
            );
          }
        }
      }
    }
  });

  it("the bridge's variables and the supervisor's flags are the ones serve --help and run --help name", () => {
    const bridge = find("Deployment", "shardbridge").spec.template.spec.containers[0];
    expect(bridge.args).to.deep.equal(["serve"]);
    const nova = find("StatefulSet", "nova-compute-ironic-rack-a").spec.template.spec.containers[0];
    for (const env of [...bridge.env, ...nova.env].filter((e: any) => e.name.startsWith("SHARDBRIDGE_")))
      expect(`${serveHelp}${runHelp}`, env.name).to.include(env.name);
    for (const flag of runFlags(nova.command)) expect(runHelp, flag).to.include(`${flag} `);
  });

  it("the shard's definition parses, lists the StatefulSet's pods, and each has its agent token", () => {
    const set = find("StatefulSet", "nova-compute-ironic-rack-a");
    const command: string[] = set.spec.template.spec.containers[0].command;
    const pods = Array.from({ length: set.spec.replicas }, (_, i) => `${set.metadata.name}-${i}`);
    expect(pods).to.have.length(2);
    expect(flagValue(command, "--id")).to.equal("$(POD_NAME)");
    const shard = flagValue(command, "--shard")!;
    const definition = parseOrThrow(
      ShardDefinitionFile,
      JSON.parse(find("ConfigMap", "shardbridge-shards").data[`${shard}.json`]),
    );
    expect(definition.name).to.equal(shard);
    expect(definition.agents).to.deep.equal(pods);

    const agentTokens = parseTokens(
      withTokens(find("Secret", `${set.metadata.name}-agent-tokens`).stringData["agent-tokens.json"]),
      "agent tokens",
    );
    expect(agentTokens.tokens.map((t) => t.role === "agent" && t.agent)).to.deep.equal(pods);
    const bridgeTokens = parseTokens(
      withTokens(find("Secret", "shardbridge-tokens").stringData["tokens.json"]),
      "bridge tokens",
    );
    for (const pod of pods)
      expect(
        bridgeTokens.tokens.some((t) => t.role === "agent" && t.agent === pod),
        pod,
      ).to.equal(true);
  });

  it("terminationGracePeriodSeconds and TimeoutStopSec outlast run's stop grace with 2 s to release", () => {
    const set = find("StatefulSet", "nova-compute-ironic-rack-a");
    const command: string[] = set.spec.template.spec.containers[0].command;
    const stopGraceMs = command.includes("--stop-grace")
      ? Number(flagValue(command, "--stop-grace"))
      : DEFAULT_STOP_GRACE_MS;
    const periodMs = set.spec.template.spec.terminationGracePeriodSeconds * 1000;
    expect(periodMs, `the pod's period, run's stop grace ${stopGraceMs} ms`).to.be.above(stopGraceMs + 2000);
    const unit = readFileSync(join(ROOT, "examples/nova-compute/shardbridge-nova-compute@.service"), "utf8");
    const timeoutS = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1]);
    const unitGraceMs = Number(/--stop-grace (\d+)/.exec(unit)?.[1] ?? DEFAULT_STOP_GRACE_MS);
    expect(timeoutS * 1000, `the unit's TimeoutStopSec, run's stop grace ${unitGraceMs} ms`).to.be.above(
      unitGraceMs + 2000,
    );
  });

  const KOLLA = "examples/kolla-ansible";
  it("kolla-ansible: the patched command's flags are run's; each shard is two identical entries on two hosts", () => {
    const patch = readFileSync(join(ROOT, KOLLA, "nova-compute-ironic.json.j2.patch"), "utf8");
    const command = /^\+\s*"command": "([^"]*shardbridge[^"]*)",$/m.exec(patch)?.[1];
    expect(command, "the patch's shardbridge command").to.be.a("string");
    for (const flag of runFlags(command!.split(" "))) expect(runHelp, flag).to.include(`${flag} `);

    const [globals] = yamlDocuments(`${KOLLA}/globals.yml`);
    const entries: any[] = globals.nova_multi_compute_ironic_config;
    const groups = new Map<string, string[]>();
    let group = "";
    for (const line of readFileSync(join(ROOT, KOLLA, "inventory.snippet"), "utf8").split("\n")) {
      const header = /^\[(.+)\]$/.exec(line.trim());
      if (header) groups.set((group = header[1]!), []);
      else if (line.trim() !== "" && !line.startsWith("#")) groups.get(group)!.push(line.trim());
    }
    const hostOf = (n: number) => {
      const hosts = groups.get(`nova-compute-ironic-${n}`);
      expect(hosts, `group nova-compute-ironic-${n}`).to.have.length(1); // kolla's precheck
      return hosts![0]!;
    };
    const byShard = new Map<string, { entry: any; host: string }[]>();
    entries.forEach((entry, i) => {
      expect(entry.shardbridge).to.equal(true);
      expect(entry.shard_key).to.match(/^[a-zA-Z0-9_.-]{1,255}$/);
      expect(entry.custom_host, "custom_host: the patch passes --host CUSTOM_HOST-ironic").to.be.a("string");
      byShard.set(entry.shard_key, [...(byShard.get(entry.shard_key) ?? []), { entry, host: hostOf(i + 1) }]);
    });
    expect(groups.get("nova-compute-ironic:children")).to.have.length(entries.length);
    for (const [shard, pair] of byShard) {
      expect(pair, shard).to.have.length(2);
      expect(pair[0]!.entry, shard).to.deep.equal(pair[1]!.entry);
      expect(pair[0]!.host, shard).to.not.equal(pair[1]!.host);
    }
  });
});
