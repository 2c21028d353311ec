import { expect } from "chai";
import { execFile, execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devTokens } from "../../src/runtime/tokens-file.js";
import { fileURLToPath } from "node:url";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge, SHARDBRIDGE } from "../helpers/cli.js";
import { hintedAgent } from "../../src/cli/serve.js";

const COMMANDS = [
  "serve",
  "status",
  "ironic-sync",
  "inspection-watch",
  "ring",
  "compare",
  "migrate",
  "simulate",
  "chaos",
  "run",
  "agent",
  "help",
  "version",
];
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The section of the top-level usage that belongs to `command` (its lines and its subcommands', up to the next command). */
function sectionOf(usage: string, command: string): string {
  const lines = usage.split("\n");
  const own = (l: string) => l.startsWith(`  ${command} `) || l === `  ${command}`;
  const start = lines.findIndex(own);
  const end = lines.findIndex((l, i) => i > start && /^ {2}\S/.test(l) && !own(l));
  return lines.slice(start, end).join("\n");
}

/**
 * The command line as operators know it from other tools: help per command, a version,
 * logging they can set, and one meaning for each exit status — 0 done, 1 failed, 2 bad
 * usage or configuration.
 */
describe("The shardbridge command line", function () {
  this.timeout(120_000);

  it("prints each command's usage on `COMMAND --help` and `help COMMAND`, exit 0, the same text the top-level list holds", async () => {
    const top = await runShardbridge(["--help"]);
    expect(top.status).to.equal(0);
    // `help COMMAND` for two of them (it is the same code path for all): fewer processes to start.
    const viaHelp = new Map(
      await Promise.all(
        ["serve", "run"].map(async (c) => [c, (await runShardbridge(["help", c])).stdout] as const),
      ),
    );
    const runs = await Promise.all(COMMANDS.map((c) => runShardbridge([c, "--help"])));
    COMMANDS.forEach((command, i) => {
      const own = runs[i]!;
      expect(own.status, `${command} --help`).to.equal(0);
      expect(own.stdout, `${command} --help`).to.include(`usage: shardbridge ${command}`);
      if (viaHelp.has(command)) expect(viaHelp.get(command), `help ${command}`).to.equal(own.stdout);
      // One source: the command's section of the top-level usage, word for word.
      expect(own.stdout, command).to.include(sectionOf(top.stdout, command));
      expect(own.stdout).to.include("exit status: 0 done, 1 failed, 2 bad usage or configuration");
    });
    // `run` passes --help after -- to its command: it is not ours (here the bad --grace answers).
    const runHelp = await runShardbridge([
      "run",
      "--id",
      "h",
      "--shard",
      "s",
      "--grace",
      "x",
      "--",
      "x",
      "--help",
    ]);
    expect(runHelp.status).to.equal(2);
    expect(runHelp.stderr).to.match(/--grace: must be an integer/);
  });

  it("exits 2 on an unknown option for every command, and on an unknown command, naming it", async () => {
    const runs = await Promise.all(COMMANDS.map((c) => runShardbridge([c, "--no-such-option"])));
    COMMANDS.forEach((command, i) => {
      expect(runs[i]!.status, command).to.equal(2);
      expect(runs[i]!.stderr, command).to.include("--no-such-option");
      expect(runs[i]!.stderr, command).to.include(`see shardbridge ${command} --help`);
      expect(runs[i]!.stdout, command).to.equal("");
    });
    const unknown = await runShardbridge(["no-such-command"]);
    expect(unknown.status).to.equal(2);
    expect(unknown.stderr).to.include("unknown command: no-such-command");
    expect((await runShardbridge(["help", "no-such-command"])).status).to.equal(2);
  });

  it("a bare shardbridge is bad usage: the list on stderr, exit 2; help and version take --help and refuse strays as every command does", async () => {
    const [bare, top, help, helpHelp, helpTwo, version, versionHelp, versionStray] = await Promise.all([
      runShardbridge([]),
      runShardbridge(["--help"]),
      runShardbridge(["help"]),
      runShardbridge(["help", "--help"]),
      runShardbridge(["help", "serve", "run"]),
      runShardbridge(["version"]),
      runShardbridge(["version", "--help"]),
      runShardbridge(["version", "now"]),
    ]);
    expect(bare.status).to.equal(2);
    expect(bare.stdout).to.equal("");
    expect(bare.stderr).to.equal(
      `${top.stdout}shardbridge: give a command (the list above)\n(see shardbridge --help)\n`,
    );
    expect(help.status).to.equal(0);
    expect(help.stdout).to.equal(top.stdout);
    expect(helpHelp.status).to.equal(0);
    expect(helpHelp.stdout).to.match(
      /^usage: shardbridge help \[options\] \[COMMAND\]\n\n {2}help \[COMMAND\] /,
    );
    expect(helpTwo.status).to.equal(2);
    expect(helpTwo.stderr).to.equal(
      "shardbridge: help: one command at a time, got serve run\n(see shardbridge help --help)\n",
    );
    expect(version.status).to.equal(0);
    expect(version.stdout).to.match(/^shardbridge \d+\.\d+\.\d+/);
    expect(versionHelp.status).to.equal(0);
    expect(versionHelp.stdout).to.match(/^usage: shardbridge version \[options\]\n\n {2}version /);
    expect(versionStray.status).to.equal(2);
    expect(versionStray.stderr).to.equal(
      "shardbridge: unexpected argument now: this command takes options only\n(see shardbridge version --help)\n",
    );
  });

  it("words every refusal of the command line's parser in one line, the option named once, a value never repeated", async () => {
    const cases: Array<[string[], string]> = [
      [["status", "--bogus"], "unknown option --bogus"],
      [["run", "-x", "--", "true"], "unknown option -x"],
      [["status", "--bridge"], "--bridge: needs a value"],
      [["simulate", "--json=yes"], "--json: takes no value"],
      [
        ["status", "--token", "-secret-0123456789"],
        "--token: its value begins with -; if that is meant, write --token=VALUE",
      ],
      [["ring", "extra"], "unexpected argument extra: this command takes options only"],
    ];
    const runs = await Promise.all(cases.map(([args]) => runShardbridge(args)));
    cases.forEach(([args, message], i) => {
      const { status, stdout, stderr } = runs[i]!;
      expect(status, args.join(" ")).to.equal(2);
      expect(stdout).to.equal("");
      expect(stderr).to.equal(`shardbridge: ${message}\n(see shardbridge ${args[0]} --help)\n`);
    });
  });

  it("says $SHARDBRIDGE_URL in the usage of every command that reads it, and each reads it", async () => {
    const readers: Array<[string, string[]]> = [
      ["status", ["--token", "0123456789abcdef"]],
      ["run", ["--id", "h", "--shard", "s", "--token", "0123456789abcdef", "--", "true"]],
      ["agent", ["--id", "h", "--shard", "s", "--token", "0123456789abcdef"]],
      ["ironic-sync", ["--ironic", "http://127.0.0.1:1", "--token", "0123456789abcdef"]],
      [
        "inspection-watch",
        ["--ironic", "http://127.0.0.1:1", "--token", "0123456789abcdef", "--secret", "s"],
      ],
    ];
    const top = (await runShardbridge(["--help"])).stdout;
    for (const command of COMMANDS) {
      const section = sectionOf(top, command);
      const says = section.includes("$SHARDBRIDGE_URL") || section.includes("env SHARDBRIDGE_URL");
      expect(says, command).to.equal(readers.some(([c]) => c === command) || command === "migrate");
    }
    // An address no URL is refused naming the variable: proof the command read it.
    const runs = await Promise.all(
      readers.map(([command, args]) =>
        runShardbridge([command, ...args], { SHARDBRIDGE_URL: "bridge:6390" }),
      ),
    );
    readers.forEach(([command], i) => {
      expect(runs[i]!.status, command).to.equal(2);
      expect(runs[i]!.stderr, command).to.include(
        "--bridge (or SHARDBRIDGE_URL): must be an http:// or https:// URL",
      );
    });
  });

  it("exits 2 on bad flag values and missing settings, 1 when the work itself fails", async () => {
    const [partitions, members, noTokens, noIronic, grace, unreachable, notifyAlone, notifyHttp] =
      await Promise.all([
        runShardbridge(["ring", "--members", "a", "--partitions", "0"]),
        runShardbridge(["ring", "--members", ""]),
        runShardbridge(["serve", "--port", "0", "--tokens", "/nonexistent/tokens.json"]),
        runShardbridge(["ironic-sync", "--token", "x"]),
        runShardbridge(["run", "--id", "h", "--shard", "s", "--grace", "5x", "--token", "t", "--", "true"]),
        runShardbridge([
          ...["ironic-sync", "--ironic", "http://127.0.0.1:1", "--bridge", "http://127.0.0.1:1"],
          ...["--token", "x"],
        ]),
        runShardbridge(["serve", "--port", "0", "--ironic-notifications", "amqp://127.0.0.1:1/"]),
        runShardbridge([
          ...["serve", "--port", "0", "--ironic", "http://127.0.0.1:1"],
          ...["--ironic-notifications", "http://127.0.0.1:1/"],
        ]),
      ]);
    expect(notifyAlone.status, notifyAlone.stderr).to.equal(2);
    expect(notifyAlone.stderr).to.include("--ironic-notifications needs --ironic");
    expect(notifyHttp.status, notifyHttp.stderr).to.equal(2);
    expect(notifyHttp.stderr).to.include("must be an amqp:// or amqps:// URL");
    expect(partitions.status, partitions.stderr).to.equal(2);
    expect(partitions.stderr).to.match(/--partitions: must be an integer/);
    expect(members.status, members.stderr).to.equal(2);
    expect(noTokens.status, noTokens.stderr).to.equal(2);
    expect(noTokens.stderr).to.match(/tokens file \/nonexistent\/tokens.json/);
    expect(noIronic.status, noIronic.stderr).to.equal(2);
    expect(grace.status, grace.stderr).to.equal(2);
    // The work failing: a node list that is not one (the data, not the flags), a peer that is not there.
    const notUuid = spawnSync(SHARDBRIDGE.command, [...SHARDBRIDGE.args, "ring", "--members", "a"], {
      input: "not-a-uuid\n",
      encoding: "utf8",
    });
    expect(notUuid.status, notUuid.stderr).to.equal(1);
    expect(unreachable.status, unreachable.stderr).to.equal(1);
  });

  it("exits 2 naming the flag for a URL that is no http:// or https:// one, before anything starts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cli-urls-"));
    try {
      const started = join(dir, "started");
      const token = ["--token", "0123456789abcdef"];
      const [status, run, agent, sync, serve] = await Promise.all([
        runShardbridge(["status", "--bridge", "127.0.0.1:6390", ...token]),
        // Before, fetch's "fetch failed" read as a bridge not up yet: run waited for ever.
        runShardbridge(
          ["run", "--id", "h", "--shard", "s", "--bridge", "ftp://x", ...token, "--", "touch", started],
          {},
          60_000,
        ),
        runShardbridge(
          ["agent", "--id", "h", "--shard", "s", ...token],
          { SHARDBRIDGE_URL: "localhost:6390" },
          60_000,
        ),
        runShardbridge(["ironic-sync", ...token], { SHARDBRIDGE_IRONIC_URL: "amqp://guest:secret@rabbit/" }),
        runShardbridge(["serve", "--port", "0", "--ironic", "http://[::1"], {}, 60_000),
      ]);
      const refusals: Array<[string, typeof status, string]> = [
        [
          "status",
          status,
          "--bridge (or SHARDBRIDGE_URL): must be an http:// or https:// URL such as http://127.0.0.1:6390, got 127.0.0.1:6390 (no scheme)",
        ],
        [
          "run",
          run,
          "--bridge (or SHARDBRIDGE_URL): must be an http:// or https:// URL such as http://127.0.0.1:6390, got a URL of scheme ftp:",
        ],
        [
          "agent",
          agent,
          "--bridge (or SHARDBRIDGE_URL): must be an http:// or https:// URL such as http://localhost:6390, got localhost:6390 (no scheme)",
        ],
        [
          "ironic-sync",
          sync,
          "--ironic (or SHARDBRIDGE_IRONIC_URL): must be an http:// or https:// URL such as http://127.0.0.1:6390, got a URL of scheme amqp:",
        ],
        [
          "serve",
          serve,
          "--ironic (or SHARDBRIDGE_IRONIC_URL): must be an http:// or https:// URL such as http://127.0.0.1:6390, got http://[::1, which does not parse as a URL",
        ],
      ];
      for (const [command, answer, message] of refusals) {
        expect(answer.status, `${command}: ${answer.stderr}`).to.equal(2);
        expect(answer.stderr).to.equal(`shardbridge: ${message}\n(see shardbridge ${command} --help)\n`);
      }
      expect(existsSync(started), "run's command").to.equal(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("serve warns of a tokens file every user can read, and a --dev-tokens file it cannot write leaves nothing behind", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cli-tokens-"));
    try {
      const tokens = join(dir, "tokens.json");
      writeFileSync(tokens, JSON.stringify(devTokens(["compute-0"])), { mode: 0o644 });
      chmodSync(tokens, 0o644);
      const serve = AgentProcess.cli("serve", ["serve", "--port", "0", "--tokens", tokens]);
      try {
        const warned = await serve.waitFor((e) => e.ev === "tokens-file-readable-by-all", 20_000);
        expect(String(warned.hint)).to.include(`chmod 600 ${tokens}`);
      } finally {
        await serve.kill();
      }
      // The write fails (here: a folder where its partial file would go, as a full disk
      // fails it): exit 2 naming the file, and no empty tokens file for the next start.
      const dev = join(dir, "dev", "tokens.json");
      mkdirSync(`${dev}.partial`, { recursive: true });
      writeFileSync(join(`${dev}.partial`, "x"), "");
      const refused = await runShardbridge(["serve", "--port", "0", "--dev-tokens", dev]);
      expect(refused.status, refused.stderr).to.equal(2);
      expect(refused.stderr).to.include(`--dev-tokens: cannot write ${dev}`);
      expect(existsSync(dev)).to.equal(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("serve refuses a shards/ entry that is no regular file (a FIFO, a link to nothing) at once: exit 2 naming it, nothing written", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cli-shards-"));
    try {
      const shards = join(dir, "shards");
      mkdirSync(shards);
      writeFileSync(join(shards, "demo.json"), `\uFEFF${JSON.stringify({ name: "demo" })}`);
      execFileSync("mkfifo", [join(shards, "cell-f.json")]);
      const dev = join(dir, "dev-tokens.json");
      const serve = ["serve", "--port", "0", "--shards", shards, "--dev-tokens", dev];
      // Opened for reading, the FIFO would hold serve for ever, silent: a minute is the bound
      // of "at once" for a process start on a loaded machine, not a measurement.
      const fifo = await runShardbridge(serve, {}, 60_000);
      expect(fifo.status, fifo.stderr).to.equal(2);
      expect(fifo.stderr).to.include(
        "shardbridge: cell-f.json: (file): a FIFO (named pipe), not a regular file: shards/ holds one regular file NAME.json per shard, or a link to one\n",
      );
      expect(fifo.stderr).to.not.include("listening");
      expect(existsSync(dev), "the development tokens file").to.equal(false);
      rmSync(join(shards, "cell-f.json"));
      symlinkSync(join(dir, "moved.json"), join(shards, "cell-l.json"));
      const dangling = await runShardbridge(serve, {}, 60_000);
      expect(dangling.status, dangling.stderr).to.equal(2);
      expect(dangling.stderr).to.include(
        `shardbridge: cell-l.json: (file): a symbolic link to ${join(dir, "moved.json")}, which does not exist\n`,
      );
      expect(existsSync(dev), "the development tokens file").to.equal(false);
      const missing = await runShardbridge([...serve.slice(0, 3), "--shards", join(dir, "nowhere")]);
      expect(missing.status, missing.stderr).to.equal(2);
      expect(missing.stderr).to.include(`shard definitions directory ${join(dir, "nowhere")}: not found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a token no Bearer header can carry: in serve's tokens file, and as --token of run and status, exit 2 before anything starts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cli-tokens-"));
    const bridge = await startBridge({
      shards: [{ name: "demo", lease_ttl_ms: 6000 }],
      agents: ["compute-0"],
    });
    try {
      const tokens = join(dir, "tokens.json");
      const file = devTokens(["compute-0"]);
      file.tokens[1]!.token = "inspector token 0123456789";
      writeFileSync(tokens, JSON.stringify(file), { mode: 0o600 });
      const serve = await runShardbridge(["serve", "--port", "0", "--tokens", tokens], {}, 60_000);
      expect(serve.status, serve.stderr).to.equal(2);
      expect(serve.stderr).to.include(`tokens file ${tokens}: tokens[1].token: must hold only A-Z a-z 0-9`);
      expect(serve.stderr).to.include("not white space");
      expect(serve.stderr).to.not.include("listening");
      expect(serve.stderr).to.not.include("inspector token");

      // fetch cannot send it: before, `run` took that for an unreachable bridge and waited for ever.
      const unsendable = "compute-0-pässwort-0123456789";
      const run = await runShardbridge(
        [
          ...["run", "--id", "compute-0", "--shard", "demo", "--bridge", bridge.url],
          ...["--token", unsendable, "--", "sleep", "60"],
        ],
        {},
        60_000,
      );
      expect(run.status, run.stderr).to.equal(2);
      expect(run.stderr).to.include(
        "shardbridge: --token (or SHARDBRIDGE_TOKEN): must hold only A-Z a-z 0-9 - . _ ~ + / (then = at the end: " +
          "RFC 6750's bearer token), not a character outside printable ASCII: it is sent as Authorization: Bearer <token>\n",
      );
      expect(run.stderr).to.not.include(unsendable);
      const status = await runShardbridge(["status", "--bridge", bridge.url], {
        SHARDBRIDGE_TOKEN: "admin token 0123456789",
      });
      expect(status.status, status.stderr).to.equal(2);
      expect(status.stderr).to.include("--token (or SHARDBRIDGE_TOKEN): must hold only");
      // Nothing started: no lease taken, no heartbeat recorded.
      const admin = { authorization: `Bearer ${bridge.tokenFor("admin")}` };
      const lease = (await (
        await fetch(`${bridge.url}/v1/shards/demo/lease`, { headers: admin })
      ).json()) as {
        lease: unknown;
      };
      expect(lease.lease).to.equal(null);
      const agents = (await (await fetch(`${bridge.url}/v1/agents`, { headers: admin })).json()) as {
        agents: unknown[];
      };
      expect(agents.agents).to.deep.equal([]);
    } finally {
      await bridge.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("serve's start-up hint names an agent the shard's definition allows, and the line works as printed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sb-cli-hint-"));
    const dev = join(dir, "dev-tokens.json");
    // The first shard is closed to compute-0, the first agent of the development tokens.
    const bridge = await startBridge({
      shards: [
        { name: "rack-a", lease_ttl_ms: 1000, agents: ["compute-1"] },
        { name: "rack-b", lease_ttl_ms: 1000, agents: ["compute-0"] },
      ],
      agents: [],
      args: ["--dev-tokens", dev],
    });
    let agent: AgentProcess | undefined;
    try {
      const deadline = performance.now() + 10_000;
      while (!bridge.serve.stderr.includes("connect an agent:") && performance.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      const line = /connect an agent: {2}node dist\/cli\.js (agent .*)$/m.exec(bridge.serve.stderr)?.[1];
      expect(line, bridge.serve.stderr).to.equal(
        `agent --id compute-1 --shard rack-a --bridge ${bridge.url} --tokens-file ${dev}`,
      );
      agent = AgentProcess.cli("hinted", line!.split(" "));
      const tokens = JSON.parse(readFileSync(dev, "utf8")) as ReturnType<typeof devTokens>;
      const admin = tokens.tokens.find((t) => t.role === "admin")!.token;
      // Held by the hinted agent, as the store says: the line did what it promised.
      const held = async () =>
        (
          (await (
            await fetch(`${bridge.url}/v1/shards/rack-a/lease`, {
              headers: { authorization: `Bearer ${admin}` },
            })
          ).json()) as { lease: { holder: string } | null }
        ).lease?.holder;
      const until = performance.now() + 20_000;
      while ((await held()) !== "compute-1" && performance.now() < until && agent.child.exitCode === null)
        await new Promise((r) => setTimeout(r, 100));
      expect(await held(), `agent exited ${agent.child.exitCode}`).to.equal("compute-1");
      // Without development tokens (--tokens): the first shard and an agent it allows, a token to fill in.
      const closed = { description: "", lease_ttl_ms: 6000 };
      expect(
        hintedAgent(
          [
            { ...closed, name: "rack-a", agents: ["host-7"] },
            { ...closed, name: "rack-b" },
          ],
          [],
        ),
      ).to.deep.equal({ shard: "rack-a", agent: "host-7", tokenInDevFile: false });
      expect(hintedAgent([], [])).to.deep.equal({
        shard: "SHARD",
        agent: "compute-0",
        tokenInDevFile: false,
      });
    } finally {
      await agent?.kill();
      await bridge.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("prints its version and commit, and a running bridge reports the same on /healthz and /readyz", async () => {
    const [long, short] = await Promise.all([runShardbridge(["--version"]), runShardbridge(["version"])]);
    expect(long.status).to.equal(0);
    expect(long.stdout).to.equal(short.stdout);
    const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")) as { version: string };
    const commit = spawnSync("git", ["-C", ROOT, "rev-parse", "--short=12", "HEAD"], { encoding: "utf8" });
    const expected = commit.status === 0 ? ` (commit ${commit.stdout.trim()})` : "";
    expect(long.stdout).to.equal(`shardbridge ${pkg.version}${expected}\n`);
    const bridge = await startBridge({ shards: [], agents: [] });
    try {
      const health = (await (await fetch(`${bridge.url}/healthz`)).json()) as Record<string, unknown>;
      expect(health).to.include({
        status: "ok",
        version: pkg.version,
        commit: commit.status === 0 ? commit.stdout.trim() : null,
      });
      const ready = (await (await fetch(`${bridge.url}/readyz`)).json()) as Record<string, unknown>;
      expect(ready).to.include({ version: pkg.version });
    } finally {
      await bridge.stop();
    }
  });

  it("takes --log-level and --log-format on every command: text for a person, JSON for a machine, a bad value exit 2", async () => {
    const agentArgs = ["agent", "--id", "compute-0", "--shard", "demo", "--bridge", "http://127.0.0.1:1"];
    const text = AgentProcess.spawnCommand("text", SHARDBRIDGE.command, [
      ...[...SHARDBRIDGE.args, ...agentArgs, "--token", "0123456789abcdef"],
      ...["--log-format", "text"],
    ]);
    const lines: string[] = [];
    text.child.stdout!.on("data", (chunk: Buffer) =>
      lines.push(...chunk.toString().split("\n").filter(Boolean)),
    );
    const deadline = performance.now() + 15_000;
    while (lines.length === 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await text.kill();
    expect(lines[0]).to.match(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z info {2}start agent=compute-0 shard=demo bridge=http:\/\/127\.0\.0\.1:1 pid=\d+$/,
    );

    // JSON on a pipe by default; --log-level error keeps the warnings of an unreachable bridge out.
    const quiet = AgentProcess.spawnCommand("quiet", SHARDBRIDGE.command, [
      ...[...SHARDBRIDGE.args, ...agentArgs, "--token", "0123456789abcdef"],
      ...["--log-level=error"],
    ]);
    const loud = AgentProcess.spawnCommand("loud", SHARDBRIDGE.command, [
      ...[...SHARDBRIDGE.args, ...agentArgs, "--token", "0123456789abcdef"],
    ]);
    await loud.waitFor((e) => e.ev === "bridge-error", 15_000);
    await new Promise((r) => setTimeout(r, 500));
    await Promise.all([quiet.kill(), loud.kill()]);
    expect(quiet.events, "lines at warn and info under --log-level error").to.deep.equal([]);
    expect(loud.events[0]).to.include({ ev: "start", level: "info" });

    const [level, format] = await Promise.all([
      runShardbridge(["ring", "--members", "a", "--log-level", "loud"]),
      runShardbridge(["serve", "--log-format", "xml"]),
    ]);
    expect(level.status).to.equal(2);
    expect(level.stderr).to.match(/--log-level: must be one of error, warn, info/);
    expect(format.status).to.equal(2);
    expect(format.stderr).to.match(/--log-format: must be json or text, got xml/);
  });

  it("names the one apt-get line to run when test packages are missing and it is not root", function () {
    if (process.getuid?.() !== 0) return this.skip();
    // As nobody, with nothing on PATH: redis-server, setpriv and curl look missing.
    const run = spawnSync(
      "setpriv",
      [
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "env",
        "PATH=/nonexistent",
        "/bin/bash",
        "scripts/test-packages.sh",
      ],
      { cwd: ROOT, encoding: "utf8" },
    );
    expect(run.status).to.equal(1);
    expect(run.stderr).to.match(
      /sudo apt-get install -y --no-install-recommends redis-server redis-sentinel util-linux curl/,
    );
  });
});

/** Run examples/lease-walkthrough.sh against `bridge`: its exit status and output, killed past `timeoutMs`. */
function walkthrough(
  bridge: { url: string; tokensFile: string },
  timeoutMs: number,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      "bash",
      [join(ROOT, "examples", "lease-walkthrough.sh")],
      {
        env: { ...process.env, BRIDGE: bridge.url, TOKENS: bridge.tokensFile },
        timeout: timeoutMs,
        encoding: "utf8",
      },
      (error, stdout, stderr) =>
        resolve({
          status: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          stdout,
          stderr,
        }),
    );
  });
}

/**
 * examples/lease-walkthrough.sh as a newcomer runs it: on a bridge just started (its store
 * recovering for one TTL), and on a shard another agent holds, which it must say and stop
 * at, not take for a recovering store and ask again for ever.
 */
describe("examples/lease-walkthrough.sh", function () {
  this.timeout(120_000);
  let bridge: BridgeProcess;
  const admin = () => ({ authorization: `Bearer ${bridge.tokenFor("admin")}` });
  const leaseOf = async (shard: string) =>
    (
      (await (await fetch(`${bridge.url}/v1/shards/${shard}/lease`, { headers: admin() })).json()) as {
        lease: { holder: string; token: number; since: string; ttl_ms: number } | null;
      }
    ).lease;
  before(async () => {
    bridge = await startBridge({
      shards: [{ name: "demo", lease_ttl_ms: 6000 }],
      agents: ["compute-0", "compute-1"],
    });
  });
  after(() => bridge.stop());

  it("waits out a recovering store as long as it says, walks the handover and hands the shard back", async () => {
    // The claim's bound: the store's one TTL (6 s) of recovery, then a dozen requests.
    const walk = await walkthrough(bridge, 60_000);
    expect(walk.status, walk.stderr).to.equal(0);
    expect(walk.stdout).to.match(
      /^\(the bridge's store is recovering: it grants leases in \d+ ms; waiting\)$/m,
    );
    const answers = walk.stdout.split("\n").filter((l) => l.startsWith("{"));
    const [first, refused, fenceBefore, handedOver, fenceAfter] = answers.map((l) => JSON.parse(l));
    expect(first).to.include({ holder: "compute-0" });
    expect(refused.errors[0].code).to.equal("shardbridge.lease.held");
    expect(fenceBefore.allowed).to.equal(true);
    expect(handedOver.holder).to.equal("compute-1");
    expect(handedOver.token).to.be.greaterThan(first.token);
    expect(fenceAfter.allowed).to.equal(false);
    expect(await leaseOf("demo"), "handed back at the end").to.equal(null);
  });

  it("says who holds the shard and stops, changing nothing, when another agent holds it", async () => {
    // Whatever the test before left: the shard free for a real agent to take and renew.
    const left = await leaseOf("demo");
    if (left !== null)
      await fetch(`${bridge.url}/v1/shards/demo/lease`, {
        method: "DELETE",
        headers: { ...admin(), "content-type": "application/json" },
        body: JSON.stringify({ agent: left.holder, token: left.token }),
      });
    const holder = AgentProcess.cli("compute-1", [
      ...["agent", "--id", "compute-1", "--shard", "demo"],
      ...["--bridge", bridge.url, "--tokens-file", bridge.tokensFile],
    ]);
    try {
      // Granted once the store's recovery (one TTL) is over.
      const until = performance.now() + 30_000;
      while ((await leaseOf("demo"))?.holder !== "compute-1" && performance.now() < until)
        await new Promise((r) => setTimeout(r, 100));
      const before = await leaseOf("demo");
      expect(before?.holder).to.equal("compute-1");
      // Before, it took this 409 for a recovering store and asked again every second, for ever.
      const walk = await walkthrough(bridge, 30_000);
      expect(walk.status, `${walk.stdout}${walk.stderr}`).to.equal(1);
      expect(walk.stderr).to.match(
        /^shard demo is held by compute-1 for \d+ ms more: stop that agent \(or release its lease: DELETE \/v1\/shards\/demo\/lease \{"agent","token"\}\) and run this again\n$/,
      );
      expect(walk.stdout).to.equal("");
      // The agent's lease as it was (renewed meanwhile, under the same token): not released or taken.
      const after = await leaseOf("demo");
      expect([after?.holder, after?.token]).to.deep.equal([before!.holder, before!.token]);
    } finally {
      await holder.kill();
    }
  });
});
