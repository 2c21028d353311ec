import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  egressRenewal,
  egressRules,
  egressTable,
  rejectedPackets,
} from "../../src/agent/run/egress-fence.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { SHARDBRIDGE } from "../helpers/cli.js";
import { dropEgressTables, egressTableExists } from "../helpers/egress-tables.js";
import { cgroupsWritable, childrenOf, running } from "../helpers/processes.js";
import { until } from "../helpers/until.js";

const SHARD = "rack-egress";
/** The tests' usual TTL: a renew every 667 ms, the fence's cut 1,750 ms after each. */
const TTL_MS = 2000;
/**
 * After the lease's earliest expiry, how late a connection the child began before it may
 * still be accepted (a SYN sent just before the deadline, accepted after): loopback's own
 * time, with room for a busy machine.
 */
const ACCEPT_MARGIN_MS = 100;

/** Whether nft is here and this process may change the ruleset (CAP_NET_ADMIN). */
function nftUsable(): boolean {
  return spawnSync("nft", ["list", "tables"], { encoding: "utf8" }).status === 0;
}

describe("egressRules: the fence's nftables script", () => {
  it("replaces the shard's table in one transaction: the cgroup's packets stopped unless its element, timed to the millisecond, is in the set, but for TCP resets", () => {
    const script = egressRules("shardbridge_run_x", "unified/a b/child", 2, 1750.9);
    const cut = 'socket cgroupv2 level 2 "unified/a b/child" socket cgroupv2 level 2 != @alive';
    expect(script.split("\n")).to.deep.equal([
      "table inet shardbridge_run_x {}",
      "delete table inet shardbridge_run_x",
      "table inet shardbridge_run_x {",
      "  set alive { typeof socket cgroupv2 level 2; flags timeout; }",
      "  chain output {",
      "    type filter hook output priority filter; policy accept;",
      `    ${cut} tcp flags & rst == rst accept`,
      `    ${cut} tcp flags & (syn | ack) == syn counter reject with tcp reset`,
      `    ${cut} meta l4proto tcp counter drop`,
      `    ${cut} counter reject`,
      "  }",
      "}",
      'add element inet shardbridge_run_x alive { "unified/a b/child" timeout 1750ms }',
      "",
    ]);
  });

  it("a renewal gives the element a new timeout; one already past leaves the set empty: cut at once", () => {
    expect(egressRenewal("t", "c", 2000)).to.equal(
      'flush set inet t alive\nadd element inet t alive { "c" timeout 2000ms }\n',
    );
    expect(egressRenewal("t", "c", 0.5)).to.equal("flush set inet t alive\n");
    expect(egressRules("t", "c", 1, -10)).to.not.include("add element");
  });

  it("counts what the rules rejected from nft's listing of the table", () => {
    const listing = [
      "table inet t {",
      "\tchain output {",
      '\t\tsocket cgroupv2 level 1 "c" socket cgroupv2 level 1 != @alive meta l4proto tcp counter packets 12 bytes 720 reject with tcp reset',
      '\t\tsocket cgroupv2 level 1 "c" socket cgroupv2 level 1 != @alive counter packets 3 bytes 90 reject',
      "\t}",
      "}",
    ].join("\n");
    expect(rejectedPackets(listing)).to.equal(15);
    expect(rejectedPackets("table inet t {\n}")).to.equal(0);
  });

  it("names one table per shard and agent, the same for every run of it on a host", () => {
    expect(egressTable("rack-a", "host-1"))
      .to.equal(egressTable("rack-a", "host-1"))
      .and.match(/^shardbridge_run_[0-9a-f]{16}$/);
    expect(egressTable("rack-a", "host-1")).to.not.equal(egressTable("rack-b", "host-1"));
    // Two supervisors of one shard on one kernel keep a table each.
    expect(egressTable("rack-a", "host-1")).to.not.equal(egressTable("rack-a", "host-2"));
  });
});

/**
 * `run --egress-fence` with the real kernel: a child that connects to a TCP server of the
 * test's every 50 ms and records each try, under a real bridge. The supervisor and its
 * watchdog are frozen, the child left running: nothing of the host kills it, and only the
 * kernel's rule stands between it and the network once the lease may have moved on.
 */
describe("run --egress-fence: the kernel cuts the child off at the lease's expiry (real nftables, real cgroup)", function () {
  this.timeout(60_000);
  let bridge: BridgeProcess;
  let server: Server;
  let port: number;
  let dir: string;
  /** when the server accepted each connection (ms of the epoch) */
  let accepted: number[] = [];
  /** every supervisor a case started: killed after them all, whatever became of a case */
  const supervisors: AgentProcess[] = [];

  before(async function () {
    if (!nftUsable() || !cgroupsWritable()) {
      console.log("      (no nft with CAP_NET_ADMIN, or no writable cgroup v2 hierarchy here)");
      return this.skip();
    }
    dir = mkdtempSync(join(tmpdir(), "sb-egress-"));
    bridge = await startBridge({ shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }], agents: ["host-a"] });
    server = createServer((socket) => {
      accepted.push(Date.now());
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });

  after(async () => {
    for (const s of supervisors) await s.kill();
    // A supervisor killed (-9) leaves its table: the next run of the shard would replace it.
    dropEgressTables(SHARD, ["host-a"]);
    await bridge?.stop();
    server?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const started = (s: AgentProcess) => {
    supervisors.push(s);
    return s;
  };

  /** `run` for host-a on the shard, up to its own flags. */
  const runArgs = () => [
    "run",
    "--id",
    "host-a",
    "--shard",
    SHARD,
    "--bridge",
    bridge.url,
    "--tokens-file",
    bridge.tokensFile,
  ];

  /** `run --egress-fence` of `script` (bash); `wrapper` (a command and its arguments) runs `run`. */
  const startScript = (script: string, env: NodeJS.ProcessEnv = {}, wrapper: string[] = []) => {
    const args = [...runArgs(), ...["--unfenced", "--egress-fence", "--", "bash", "-c"], script];
    const [command, ...before] = wrapper;
    return started(
      command === undefined
        ? AgentProcess.cli("host-a", args, env)
        : AgentProcess.spawnCommand(
            "host-a",
            command,
            [...before, SHARDBRIDGE.command, ...SHARDBRIDGE.args, ...args],
            env,
          ),
    );
  };
  /** A child that tries a connection every 50 ms, each try recorded in `records` ("ok|refused NS"). */
  const start = (records: string, env: NodeJS.ProcessEnv = {}, wrapper: string[] = []) =>
    startScript(
      `while :; do if (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null; then r=ok; else r=refused; fi; ` +
        `echo "$r $(date +%s%N)" >> ${records}; sleep 0.05; done`,
      env,
      wrapper,
    );
  /**
   * The supervisor of `s` and its watchdog frozen, its child (`child`) left running:
   * nothing of the host can kill the child, and only the kernel's rule stands between it
   * and the network once the lease may have moved on. `wake` sends them SIGCONT.
   */
  const freezeSupervisor = (s: AgentProcess, child: number) => {
    const pid = s.child.pid!;
    const watchdog = childrenOf(pid).filter((p) => p !== child);
    const signal = (name: NodeJS.Signals) => {
      for (const p of [pid, ...watchdog])
        try {
          process.kill(p, name);
        } catch {
          // an nft the supervisor ran, ended since
        }
    };
    signal("SIGSTOP");
    return { frozenAt: Date.now(), wake: () => signal("SIGCONT") };
  };
  const tries = (records: string) =>
    readFileSync(records, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => {
        const [result, ns] = line.split(" ");
        return { result: result!, atMs: Number(BigInt(ns!) / 1_000_000n) };
      });

  it("a holder's child reaches the network; frozen with its watchdog past the lease, its packets are rejected from the expiry on, and the table goes with the child", async () => {
    const records = join(dir, "tries");
    accepted = [];
    const s = start(records);
    const started = await s.waitFor((e) => e.ev === "child-started", 10_000);
    const table = egressTable(SHARD, "host-a");
    expect(started.egress_fence, "the child-started line names the table").to.equal(table);
    expect(egressTableExists(table), "the table, in the kernel").to.equal(true);
    const child = Number(started.pid);
    // A holder that renews is never cut off: over two TTLs, every try got through.
    await new Promise((r) => setTimeout(r, 2 * TTL_MS));
    const held = tries(records);
    expect(held.length, "tries while the lease was held").to.be.greaterThan(10);
    expect(
      held.filter((t) => t.result !== "ok"),
      "tries refused while the lease was held and renewed",
    ).to.deep.equal([]);

    // The supervisor and its watchdog frozen; the child runs on.
    const { frozenAt, wake } = freezeSupervisor(s, child);
    // The lease's earliest expiry is TTL after the last renew the supervisor sent, before the freeze.
    const expiryBound = frozenAt + TTL_MS;
    try {
      await until(
        "the child's tries refused for a second past the lease's expiry",
        async () => tries(records).filter((t) => t.atMs > expiryBound && t.result === "refused").length,
        (n) => n >= 10,
        TTL_MS + 10_000,
      );
      expect(running(child), "the child ran on (nothing of the host killed it)").to.equal(true);
      expect(
        accepted.filter((at) => at > expiryBound + ACCEPT_MARGIN_MS).map((at) => at - expiryBound),
        "connections accepted from the child after the lease's expiry (ms after it)",
      ).to.deep.equal([]);
      expect(
        tries(records).filter((t) => t.atMs > expiryBound + ACCEPT_MARGIN_MS && t.result === "ok"),
        "tries the child saw succeed after the expiry",
      ).to.deep.equal([]);
    } finally {
      wake();
    }
    // Woken past its lease, the supervisor KILLs the child and removes the table.
    await s.waitFor((e) => e.ev === "child-stopped", 10_000);
    await until(
      "the table removed",
      async () => egressTableExists(table),
      (exists) => !exists,
      5000,
    );
    // Its counters, read as it went: at least one rejected packet (a SYN) per refused try.
    const refused = tries(records).filter((t) => t.result === "refused").length;
    const removed = await s.waitFor((e) => e.ev === "egress-fence-removed", 5000);
    expect(removed, "the supervisor's record of the table it removed").to.include({
      token: started.token,
      table,
    });
    expect(removed.rejected_packets, "packets the rules rejected").to.be.at.least(refused);
    s.signal("SIGTERM");
    await s.exited();
  });

  it("a connection the child holds: nothing it writes after the expiry arrives, and when the woken supervisor KILLs it, its peer sees a reset, as RabbitMQ must to requeue what it had delivered there", async () => {
    // The peer sends the child a line, which the child reads (a message delivered to a
    // nova-compute that read it once woken, before the KILL), and records what arrives and
    // how the connection ends.
    const arrived: number[] = [];
    let ended: { how: string; atMs: number } | null = null;
    const held: Socket[] = [];
    const peer = createServer((socket) => {
      held.push(socket);
      socket.write("delivered\n");
      // The first child's connection only: woken, its supervisor takes the free lease again
      // and starts another child, which connects anew.
      if (held.length > 1) return;
      socket.on("data", () => arrived.push(Date.now()));
      socket.on(
        "error",
        (error: NodeJS.ErrnoException) => (ended ??= { how: error.code ?? "error", atMs: Date.now() }),
      );
      socket.on("end", () => (ended ??= { how: "FIN", atMs: Date.now() }));
    });
    await new Promise<void>((resolve) => peer.listen(0, "127.0.0.1", resolve));
    try {
      const peerPort = (peer.address() as { port: number }).port;
      // Everything the peer sends read at once; a line written every 50 ms, a failed write
      // not stopping it. Killed after the cut, the child leaves its socket holding lines the
      // fence dropped, its FIN queued behind them: the peer hears nothing from the kernel,
      // and once the table goes the kernel sends them on (tried without the reset: they
      // arrived 1.5 s after the table's removal, then the FIN). The reset purges them.
      const s = startScript(
        `exec 3<>/dev/tcp/127.0.0.1/${peerPort}; cat <&3 >/dev/null & ` +
          `while :; do echo "x $(date +%s%N)" >&3 2>/dev/null; sleep 0.05; done`,
      );
      const childStarted = await s.waitFor((e) => e.ev === "child-started", 10_000);
      await until(
        "lines from the child",
        async () => arrived.length,
        (n) => n >= 5,
        5000,
      );
      const { frozenAt, wake } = freezeSupervisor(s, Number(childStarted.pid));
      const expiryBound = frozenAt + TTL_MS;
      let wokenAt: number;
      try {
        // Frozen a second past the lease's expiry, the child writing all along.
        await new Promise((r) => setTimeout(r, expiryBound + 1000 - Date.now()));
        expect(ended, "the connection, while the child ran past its lease").to.equal(null);
      } finally {
        wake();
        wokenAt = Date.now();
      }
      // Woken past its lease, the supervisor KILLs the child, then resets what its sockets left.
      await s.waitFor((e) => e.ev === "child-stopped", 10_000);
      const reset = await s.waitFor((e) => e.ev === "egress-fence-reset", 5000);
      expect([reset.connections, reset.left], "connections the supervisor reset; sockets left").to.deep.equal(
        [1, 0],
      );
      // None left holding the dropped lines, the table goes: nothing is let out after it.
      await s.waitFor((e) => e.ev === "egress-fence-removed", 5000);
      const end = await until(
        "the peer told the connection is gone",
        async () => ended,
        (e) => e !== null,
        5000,
      );
      expect(end!.how, "how the peer learnt it").to.equal("ECONNRESET");
      console.log(`      the peer's reset came ${end!.atMs - wokenAt} ms after the supervisor's SIGCONT`);
      expect(
        arrived.filter((at) => at > expiryBound + ACCEPT_MARGIN_MS).map((at) => at - expiryBound),
        "lines that arrived after the lease's expiry (ms after it)",
      ).to.deep.equal([]);
      s.signal("SIGTERM");
      await s.exited();
    } finally {
      for (const socket of held) socket.destroy();
      peer.close();
    }
  });

  it("run's own capabilities (CAP_NET_ADMIN, for the fence) never pass to its child", async () => {
    const records = join(dir, "caps");
    // run as a unit with AmbientCapabilities=CAP_NET_ADMIN starts it: that capability in its ambient set.
    const s = started(
      AgentProcess.spawnCommand("host-a", "setpriv", [
        ...[
          "--inh-caps=+net_admin",
          "--ambient-caps=+net_admin",
          "--",
          SHARDBRIDGE.command,
          ...SHARDBRIDGE.args,
        ],
        ...runArgs(),
        ...[
          "--unfenced",
          "--",
          "sh",
          "-c",
          `grep -E '^Cap(Inh|Amb)' /proc/self/status > ${records}; exec sleep 1000`,
        ],
      ]),
    );
    await s.waitFor((e) => e.ev === "child-started", 10_000);
    const own = readFileSync(`/proc/${s.child.pid}/status`, "utf8");
    expect(own, "run's own ambient set").to.match(/^CapAmb:\s+0+1000$/m);
    const child = await until(
      "the child's capability sets",
      async () => (existsSync(records) ? readFileSync(records, "utf8") : ""),
      (text) => text.split("\n").filter(Boolean).length === 2,
      5000,
    );
    expect(child.split("\n").filter(Boolean)).to.deep.equal([
      "CapInh:\t0000000000000000",
      "CapAmb:\t0000000000000000",
    ]);
    s.signal("SIGTERM");
    await s.exited();
  });

  it("without nft the child is not started: exit 2, said why", async () => {
    const records = join(dir, "never");
    // bash (the watchdog, the child) is in /usr/bin; nft is in /usr/sbin.
    const s = start(records, { PATH: "/usr/bin:/bin" });
    await s.exited();
    expect(s.child.exitCode).to.equal(2);
    const refusal = s.events.find((e) => e.ev === "child-not-started");
    expect(String(refusal?.why)).to.match(/^run --egress-fence: nft: spawnSync nft ENOENT/);
    expect(s.events.filter((e) => e.ev === "child-started")).to.deep.equal([]);
    expect(() => readFileSync(records), "no try was ever made").to.throw();
  });

  it("inside a cgroup namespace (a container's), where the rule would match nothing, the child is not started: exit 2, said why", async function () {
    if (spawnSync("unshare", ["--cgroup", "true"]).status !== 0) {
      console.log("      (unshare --cgroup is not allowed here)");
      return this.skip();
    }
    const records = join(dir, "namespaced");
    const s = start(records, {}, ["unshare", "--cgroup"]);
    await s.exited();
    expect(s.child.exitCode).to.equal(2);
    const refusal = s.events.find((e) => e.ev === "child-not-started");
    expect(String(refusal?.why)).to.match(
      /^run --egress-fence: this process is in a cgroup namespace \(cgroup:\[\d+\]\), as in a container/,
    );
    expect(s.events.filter((e) => e.ev === "child-started")).to.deep.equal([]);
    expect(() => readFileSync(records), "no try was ever made").to.throw();
  });
});
