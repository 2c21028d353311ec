import { expect } from "chai";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { AgentProcess, type AgentEvent } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { cgroupsWritable, childrenOf, running } from "../helpers/processes.js";
import { until } from "../helpers/until.js";
import { RUN_CHILD, lives, runFixture, watchChildren, type ChildLife } from "../helpers/run-records.js";
import { ChildCgroup } from "../../src/agent/run/cgroup.js";
import { ChildGroup } from "../../src/agent/run/child.js";
import { GroupMembers, groupOf } from "../../src/agent/run/group-members.js";
import { DEFAULT_STOP_GRACE_MS } from "../../src/agent/run/supervisor.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { SHARDBRIDGE } from "../helpers/cli.js";

const TTL_MS = 2000;
const SHARD = "rack-r";

describe("GroupMembers: whether a process group still runs (real processes)", () => {
  it("a group whose only process is a zombie has ended, though kill -0 still finds it", async () => {
    // `setsid sleep 0` leads a group of its own, exits at once, and stays a zombie: its
    // parent, having exec'd `sleep 1000`, never reaps it.
    const parent = spawn("sh", ["-c", "setsid sleep 0 & echo $!; exec sleep 1000"], {
      stdio: ["ignore", "pipe", "ignore"],
      detached: true, // the parent leads a group of its own
    });
    try {
      const zombie = Number(
        await new Promise<string>((r) => parent.stdout.once("data", (d) => r(String(d)))),
      );
      while (running(zombie)) await new Promise((r) => setTimeout(r, 5));
      expect(() => process.kill(-zombie, 0), "kill -0 on its group").to.not.throw();
      expect(new GroupMembers(zombie).running(), "its group, by GroupMembers").to.equal(false);
      expect(new GroupMembers(parent.pid!).running(), "the parent's group").to.equal(true);
    } finally {
      parent.kill("SIGKILL");
    }
  });
});

/**
 * `shardbridge run` on a real bridge: two supervisors on one shard, each guarding the
 * fixture child. A poller in this process looks at every child the records name every
 * 10 ms; at no instant may two be running, and the children's own records must show each
 * child's last write before the next one started.
 */
describe("shardbridge run: a command only while its host holds the lease (real bridge, real processes)", function () {
  this.timeout(60_000);
  let bridge: BridgeProcess;
  let records: string;
  let supervisors: AgentProcess[] = [];
  let watch: ReturnType<typeof watchChildren>;

  before(async () => {
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS, agents: ["host-a", "host-b"] }],
      agents: ["host-a", "host-b"],
    });
  });
  after(async () => bridge?.stop());

  beforeEach(() => {
    records = join(bridge.dir, `records-${Date.now()}.txt`);
    writeFileSync(records, "");
    watch = watchChildren(records);
  });
  afterEach(async () => {
    for (const s of supervisors) await s.kill();
    supervisors = [];
    watch.stop(); // whatever the supervisors left: nothing may be left
  });

  const supervise = (host: string, extra: Record<string, string> = {}) => {
    const s = runFixture(host, SHARD, bridge, records, extra);
    supervisors.push(s);
    return s;
  };
  /** Both supervisors; answers which is active and which stands by, once the child runs. */
  const pair = async (extra: Record<string, string> = {}) => {
    const a = supervise("host-a", extra);
    const b = supervise("host-b", extra);
    const first = await Promise.race(
      [a, b].map((s) => s.waitFor((e) => e.ev === "child-started", 15_000).then(() => s)),
    );
    await untilLives(1); // the child is up and has written
    return { active: first, standby: first === a ? b : a };
  };
  /** Until the records name `n` children (a child writes its first record a moment after it is started). */
  const untilLives = async (n: number) => {
    const deadline = performance.now() + 3000;
    while (lives(records).length < n && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    expect(lives(records).length, "children recorded").to.be.at.least(n);
  };
  const expectOneAtATime = () => {
    expect(watch.overlaps, "instants with two children running").to.deep.equal([]);
    const all = lives(records);
    for (let i = 1; i < all.length; i++)
      expect(
        all[i]!.startNs > all[i - 1]!.lastWriteNs,
        `child ${all[i]!.pid} started before ${all[i - 1]!.pid}'s last write`,
      ).to.equal(true);
    return all;
  };
  const takeoverMs = (all: ChildLife[]) => Number(all[1]!.startNs - all[0]!.lastWriteNs) / 1e6;

  it("gives the child the shard, its token and nova's options in its environment", async () => {
    const { active } = await pair();
    const started = await active.waitFor((e) => e.ev === "child-started", 5000);
    // run --unfenced (the bridge fronts no Ironic) says so beside every child it starts.
    const unfenced = await active.waitFor((e) => e.ev === "child-unfenced", 5000);
    expect(unfenced.token, "the unfenced child's token").to.equal(started.token);
    await new Promise((r) => setTimeout(r, 200));
    const line = readFileSync(records, "utf8")
      .split("\n")
      .find((l) => l.startsWith("start "))!;
    expect(line).to.include(`start ${started.pid} ${started.token} `);
    expect(line).to.include(`host=${SHARD}-ironic shard=${SHARD}`);
    expectOneAtATime();
  });

  it("tells the bridge it is up and serves the shard (heartbeats), active or standing by", async () => {
    const { active, standby } = await pair();
    // Each heartbeats on its own timer, not at the moments pair() waits for: read until both did.
    const client = new BridgeClient(bridge.url, bridge.tokenFor("admin"));
    const { agents } = await until(
      "both supervisors' heartbeats",
      () => client.agents(),
      (a) =>
        [active, standby].every((s) => a.agents.some((row) => row.id === s.name && row.serves.length > 0)),
      5000,
    );
    const row = (s: AgentProcess) => agents.find((a) => a.id === s.name);
    expect(row(active), "the active").to.deep.include({ up: true, serves: [SHARD], shards: [SHARD] });
    expect(row(standby), "the standby").to.deep.include({ up: true, serves: [SHARD], shards: [] });
    // The shard carries no nodes: like a nova-compute whose shard is empty, both stay in nova's pool.
    expect([row(active)!.legacy_pool, row(standby)!.legacy_pool]).to.deep.equal([true, true]);
  });

  it("kill -9 of the active supervisor: its child dies at once, the standby's starts within TTL + 1 s", async () => {
    const { active, standby } = await pair();
    const child = (await active.waitFor((e) => e.ev === "child-started", 5000)).pid as number;
    active.signal("SIGKILL");
    const killedAt = performance.now();
    while (running(child) && performance.now() - killedAt < 1000) await new Promise((r) => setTimeout(r, 5));
    const goneMs = performance.now() - killedAt;
    expect(running(child), "the child outlived its supervisor by a second").to.equal(false);
    await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 1000);
    await untilLives(2);
    const all = expectOneAtATime();
    console.log(
      `      child gone ${goneMs.toFixed(0)} ms after kill -9; next child's first record ${takeoverMs(all).toFixed(0)} ms after the last write`,
    );
    expect(takeoverMs(all)).to.be.below(TTL_MS + 1000);
  });

  it("SIGSTOP of the active supervisor alone past the TTL: the watchdog kills the child before the standby starts one", async () => {
    const { active, standby } = await pair();
    active.signal("SIGSTOP");
    await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 1000);
    await untilLives(2);
    const all = expectOneAtATime();
    console.log(
      `      next child's first record ${takeoverMs(all).toFixed(0)} ms after the frozen one's last write`,
    );
    active.signal("SIGCONT");
    // Woken, it finds its deadline passed and stands by; it starts no second child.
    await active.waitFor((e) => e.ev === "lost", 5000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(active.events.filter((e) => e.ev === "child-started")).to.have.length(1);
    expectOneAtATime();
  });

  it("the whole host frozen past the TTL and woken after the failover: the supervisor KILLs its child at once, no grace", async () => {
    const { active, standby } = await pair();
    const child = Number((await active.waitFor((e) => e.ev === "child-started", 5000)).pid);
    // The supervisor, its watchdog (its other child) and the child's group: all of the host's part.
    const supervisor = active.child.pid!;
    const watchdog = childrenOf(supervisor).filter((pid) => pid !== child);
    for (const pid of [supervisor, ...watchdog]) process.kill(pid, "SIGSTOP");
    process.kill(-child, "SIGSTOP");
    await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 1000);
    process.kill(-child, "SIGCONT");
    for (const pid of [supervisor, ...watchdog]) process.kill(pid, "SIGCONT");
    // Woken past the lease's expiry, a grace would let the stale child run beside the
    // standby's: the supervisor's own record says it gave none.
    const stopped = await active.waitFor((e) => e.ev === "child-stopped", 5000);
    expect(stopped).to.include({ grace_ms: 0 });
    // No grace is no TERM: the child's handler never ran (a bash trap ends within the few ms
    // of the supervisor's first look, and did, as exit 0, before a stop with no grace KILLed).
    expect(
      readFileSync(records, "utf8").match(new RegExp(`^term ${child} `, "m")),
      "the woken child's TERM handler ran",
    ).to.equal(null);
    // KILLed by the supervisor, or by its watchdog, woken at the same instant and past the
    // deadline it was armed with: then the group had ended before the supervisor looked, and
    // the watchdog says so as it KILLs (before it removes the cgroup).
    if (stopped.killed !== true)
      await active.waitFor((e) => e.ev === "watchdog" && String(e.line).includes('"deadline"'), 2000);
  });

  /** The acquires waiting at the bridge for the held lease (its gauge): the standby's, once it waits. */
  const waitingAcquires = async () =>
    Number(
      /^shardbridge_lease_waiting_acquires (\d+)$/m.exec(
        await (await fetch(`${bridge.url}/metrics`)).text(),
      )?.[1],
    );
  // SIGHUP (a closed terminal or ssh session) is handled as SIGTERM: node's default was to
  // die at once, status 129, no log line, the child killed by pdeathsig and its lease left
  // held until it expired.
  /** Milliseconds between two of a supervisor's log lines, by their own timestamps. */
  const between = (from: AgentEvent, to: AgentEvent) =>
    Date.parse(String(to.timestamp)) - Date.parse(String(from.timestamp));

  // Handed back, not run out: the standby is granted the lease by the release. A lease that
  // ran out could be granted no sooner than TTL/3 after the signal (the holder's last renew
  // went through within 2/3 TTL before it, or it would have let the lease go already), so
  // that is the bound; how fast the handover is (a few ms, its child ~20 ms) is printed
  // here and measured by `make bench failover`, never held to this machine's speed.
  for (const signal of ["SIGTERM", "SIGHUP"] as const)
    it(`${signal} to the active: its child is stopped, the lease handed back, the standby's child starts at once`, async () => {
      const { active, standby } = await pair();
      await standby.waitFor((e) => e.ev === "standby", 5000);
      await new Promise((r) => setTimeout(r, 100)); // its waiting acquire is at the bridge
      active.signal(signal);
      // Handed back, not run out: the supervisor says it released. The time is measured and
      // printed; the bound is the TTL + 1 s, far above it, so a loaded machine passes.
      await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 1000);
      await active.exited();
      expect(active.child.exitCode).to.equal(0);
      expect(active.events.map((e) => e.ev)).to.include("released");
      expect(active.events.find((e) => e.ev === "stopping")).to.include({ signal });
      // Stopped while the lease is held: the child gets the stop grace, the lease kept meanwhile.
      expect(active.events.find((e) => e.ev === "child-stopped")).to.include({
        grace_ms: DEFAULT_STOP_GRACE_MS,
        killed: false,
      });
      await untilLives(2);
      const all = expectOneAtATime();
      expect(readFileSync(records, "utf8")).to.match(new RegExp(`^term ${all[0]!.pid} `, "m"));
      const stopping = active.events.find((e) => e.ev === "stopping")!;
      const grantedMs = between(stopping, await standby.waitFor((e) => e.ev === "active", 1));
      const startedMs = between(stopping, await standby.waitFor((e) => e.ev === "child-started", 1));
      console.log(
        `      handover after ${signal}: the standby granted ${grantedMs} ms and its child started ${startedMs} ms ` +
          `after the signal; its first record ${takeoverMs(all).toFixed(0)} ms after the last write`,
      );
      expect(
        grantedMs,
        "the standby granted the lease by the release, before it could have run out",
      ).to.be.below(TTL_MS / 3);
      expect(startedMs, "its child started once it was granted").to.be.at.least(grantedMs);
    });

  it("SIGTERM to the active whose child takes 3 TTLs to finish: the lease is kept meanwhile, the standby's child starts only after it exited", async () => {
    const drainMs = 3 * TTL_MS;
    const { active, standby } = await pair({ RUN_DRAIN_MS: String(drainMs) });
    await standby.waitFor((e) => e.ev === "standby", 5000);
    active.signal("SIGTERM");
    await standby.waitFor((e) => e.ev === "child-started", drainMs + TTL_MS + 5000);
    await active.exited();
    await untilLives(2);
    const [first, second] = expectOneAtATime() as [ChildLife, ChildLife];
    const terms = [...readFileSync(records, "utf8").matchAll(/^term (\d+) (\d+)$/gm)];
    // One TERM: a second can land while the first one's handler runs (nova-compute 34 then
    // hangs inside its own stop until it is KILLed). The child is in run's cgroup too, if
    // one could be made: the group's TERM reaches it, the cgroup's must not again.
    expect(
      terms.map((t) => Number(t[1])),
      "the TERMs the children received (bash runs its trap once for each it was told of)",
    ).to.deep.equal([first.pid]);
    const term = terms[0]!;
    // The first child went on working past the TTL after its TERM: the lease was renewed
    // meanwhile (a lease run out would have let the standby's child start beside it).
    const workedAfterTermMs = Number(first.lastWriteNs - BigInt(term[2]!)) / 1e6;
    expect(workedAfterTermMs, "the child's work after its TERM").to.be.above(TTL_MS);
    expect(
      second.startNs > first.lastWriteNs,
      "the standby's child started after the first's last write",
    ).to.equal(true);
    expect(
      active.events.map((e) => e.ev),
      "handed back, not run out",
    ).to.include("released");
    expect(active.events.find((e) => e.ev === "child-stopped")).to.include({ killed: false });
    console.log(
      `      the TERMed child worked ${workedAfterTermMs.toFixed(0)} ms more under the kept lease; the standby's ` +
        `child started ${(Number(second.startNs - first.lastWriteNs) / 1e6).toFixed(0)} ms after its last write`,
    );
  });

  it("a child that exits by itself: the lease is released, the supervisor exits with its code, the standby takes over", async () => {
    const once = join(bridge.dir, "exit-once");
    writeFileSync(once, "");
    const { active, standby } = await pair({ RUN_EXIT_ONCE: once });
    await active.exited();
    expect(active.child.exitCode).to.equal(3);
    expect(existsSync(once)).to.equal(false);
    expect(
      active.events.map((e) => e.ev),
      "handed back, not run out",
    ).to.include("released");
    await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 1000);
    await untilLives(2);
    expectOneAtATime();
  });

  /** The processes a child left in its group (RUN_LEAVE), by its own records. */
  const leftBehind = () =>
    readFileSync(records, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("left "))
      .map((l) => Number(l.split(" ")[1]));

  // A process the child leaves in its group is TERMed with the group and is gone at once,
  // but its zombie waits for init to reap it (1.0-1.8 s here): counted alive, it held the
  // lease that long. Checked by order, which load cannot blur: where init reaped it later
  // than 300 ms after the stop, the release came before the reaping (seen by /proc/<pid>
  // going away). The time bound is loose (1 s against ~10 ms measured: 289 ms on a 2-core
  // machine at load 9); the handover's own goal is `make bench`'s and the SIGTERM case's above.
  for (const how of ["SIGTERM", "its own exit"] as const)
    it(`a child that leaves a process in its group, stopped by ${how}: the lease is released once the group has ended, not once init reaped it`, async () => {
      // The exit's file is made only once the standby waits at the bridge (below): made
      // before, the child exited 500 ms after its start, and a standby whose own start was
      // slower (a loaded machine) was granted the lease at its first acquire, never standing by.
      const once = join(bridge.dir, "exit-once");
      const { active, standby } = await pair({ RUN_LEAVE: "1", RUN_EXIT_ONCE: once });
      const deadline = performance.now() + 3000;
      while (leftBehind().length === 0 && performance.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      expect(leftBehind(), "the process left in the group").to.have.length(1);
      const left = leftBehind()[0]!;
      // When it ended (a zombie, or gone) and when init reaped it (gone), polled every 5 ms.
      let diedAt: number | undefined;
      let reapedAt: number | undefined;
      const reaping = setInterval(() => {
        // Read, not checked then read: init may reap it in between (ENOENT).
        let stat: string | null = null;
        try {
          stat = readFileSync(`/proc/${left}/stat`, "latin1");
        } catch {
          stat = null;
        }
        if (stat === null || / [ZX] /.test(stat.slice(stat.lastIndexOf(")")))) diedAt ??= Date.now();
        if (stat === null) reapedAt ??= Date.now();
      }, 5);
      reaping.unref(); // cleared below; a failed expectation before that leaves a 5 ms poll until exit
      // Its waiting acquire at the bridge, by the bridge's own gauge: a supervisor starts in
      // its own time (pair() allows 15 s), and the handover timed below is to a waiter.
      await until("the standby's acquire waiting at the bridge", waitingAcquires, (n) => n === 1, 15_000);
      if (how === "SIGTERM") active.signal("SIGTERM");
      else writeFileSync(once, "");
      const released = await active.waitFor((e) => e.ev === "released", TTL_MS + 1000);
      const from = await active.waitFor((e) => e.ev === (how === "SIGTERM" ? "stopping" : "child-exited"), 1);
      expect(running(left), "the process left behind, at the release").to.equal(false);
      const ms = between(from, released);
      const grantedMs = between(from, await standby.waitFor((e) => e.ev === "active", TTL_MS + 1000));
      const fromAt = Date.parse(String(from.timestamp));
      const reapedBy = performance.now() + 3000;
      while (reapedAt === undefined && performance.now() < reapedBy)
        await new Promise((r) => setTimeout(r, 10));
      clearInterval(reaping);
      const diedMs = diedAt! - fromAt;
      const reapedMs = reapedAt === undefined ? null : reapedAt - fromAt;
      console.log(
        `      released ${ms} ms, the standby granted ${grantedMs} ms; the process left behind ended ` +
          `${diedMs} ms and was reaped ${reapedMs ?? "> 3000"} ms after ${how === "SIGTERM" ? "the signal" : "the child's exit"}`,
      );
      if (reapedMs === null || reapedMs - diedMs > 300)
        expect(ms, "released before init reaped the zombie").to.be.below(reapedMs ?? Infinity);
      expect(ms).to.be.at.most(1000);
      expect(grantedMs).to.be.at.most(1000);
      await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 1000);
      await untilLives(2);
      expectOneAtATime();
    });

  /** The grandchildren that left their child's process group, by their own records. */
  const escapees = () =>
    readFileSync(records, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("escapee "))
      .map((l) => Number(l.split(" ")[1]));
  const untilEscapees = async (n: number) => {
    const deadline = performance.now() + 3000;
    while (escapees().length < n && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(escapees().length, "grandchildren recorded").to.be.at.least(n);
  };
  const untilGone = async (pid: number, withinMs: number) => {
    const since = performance.now();
    while (running(pid) && performance.now() - since < withinMs) await new Promise((r) => setTimeout(r, 5));
    return running(pid) ? null : performance.now() - since;
  };
  const killEscapees = () => {
    for (const pid of escapees()) if (running(pid)) process.kill(pid, "SIGKILL");
  };

  it("a grandchild that left the child's process group (setsid) is stopped with it on SIGTERM: the child's cgroup", async function () {
    if (!cgroupsWritable()) {
      console.log("      (no writable cgroup v2 hierarchy here: the process group is all that is stopped)");
      return this.skip();
    }
    try {
      const { active } = await pair({ RUN_ESCAPE: "1" });
      const started = await active.waitFor((e) => e.ev === "child-started", 1);
      expect(started.cgroup, "the child's cgroup").to.be.a("string");
      await untilEscapees(1);
      const [escapee] = escapees();
      active.signal("SIGTERM");
      await active.exited();
      expect(running(escapee!), "the escaped grandchild outlived the stop").to.equal(false);
      expect(existsSync(String(started.cgroup)), "the child's cgroup, removed").to.equal(false);
    } finally {
      killEscapees();
    }
  });

  it("kill -9 of the supervisor: the escaped grandchild dies too (the watchdog kills the cgroup)", async function () {
    if (!cgroupsWritable()) return this.skip();
    try {
      const { active } = await pair({ RUN_ESCAPE: "1" });
      await untilEscapees(1);
      const [escapee] = escapees();
      active.signal("SIGKILL");
      const goneMs = await untilGone(escapee!, 1000);
      expect(goneMs, "the escaped grandchild outlived its supervisor by a second").to.not.equal(null);
      console.log(`      escaped grandchild gone ${goneMs!.toFixed(0)} ms after kill -9 of the supervisor`);
    } finally {
      killEscapees();
    }
  });

  it("a stop TERMs each process once: the group by its TERM, the cgroup's only where they left the group", async function () {
    if (!cgroupsWritable()) return this.skip();
    const cgroup = ChildCgroup.create(`shardbridge-test-term.${process.pid}`);
    if (!(cgroup instanceof ChildCgroup)) return this.skip();
    // A leader that stays in its group, and a grandchild that leaves it (setsid).
    const group = new ChildGroup(
      ["sh", "-c", "setsid sleep 1000 & exec sleep 1000"],
      process.env,
      "[term-once]",
      () => performance.now(),
      cgroup,
    );
    // Both in the cgroup is not enough: the grandchild is counted there from its fork, and
    // until its setsid runs it is still in the group, and the group's TERM ends it.
    const escapee = await until(
      "the grandchild in the cgroup, out of the group",
      async () => cgroup.pids().find((pid) => pid !== group.pid && groupOf(pid) === pid),
      (pid) => pid !== undefined,
      5000,
      10,
    ).then(Number);
    // What the stop asks of the kernel, recorded on the way (the signals are sent as asked).
    const sent: Array<[number, string]> = [];
    const kill = process.kill.bind(process);
    process.kill = (pid: number, signal?: string | number) => {
      if (signal !== 0) sent.push([pid, String(signal)]);
      return kill(pid, signal);
    };
    try {
      const stopped = await group.stop(5000);
      expect(stopped.killed, "stopped by the TERMs, not KILLed").to.equal(false);
    } finally {
      process.kill = kill;
    }
    // Old code TERMed the leader twice (the group's, then the cgroup's): nova-compute 34
    // then hangs in its graceful stop until KILLed.
    expect(sent, "the signals the stop sent").to.deep.equal([
      [-group.pid, "SIGTERM"],
      [escapee, "SIGTERM"],
    ]);
  });

  it("refuses bad input with exit 2 before anything starts", () => {
    const run = (...args: string[]) =>
      spawnSync(SHARDBRIDGE.command, [...SHARDBRIDGE.args, "run", ...args], {
        encoding: "utf8",
        env: { ...process.env, RUN_RECORDS: records },
      });
    const base = ["--bridge", bridge.url, "--tokens-file", bridge.tokensFile];
    const cases: Array<[string[], RegExp]> = [
      [["--id", "host-a", "--shard", SHARD, ...base], /give the command to run after --/],
      [
        ["--id", "host-a", "--shard", "no-such-shard", ...base, "--", RUN_CHILD],
        /knows no shard no-such-shard/,
      ],
      [
        ["--id", "host-a", "--shard", SHARD, "--grace", "5000", ...base, "--", RUN_CHILD],
        /--grace 5000 ms is more than the lease leaves \(417 ms/,
      ],
      [
        ["--id", "host-c", "--shard", SHARD, ...base, "--token", bridge.tokenOf("host-a"), "--", RUN_CHILD],
        /may not serve shard/,
      ],
      [["--id", "host-a", "--shard", "Bad Shard!", ...base, "--", RUN_CHILD], /shard/],
      // This bridge fronts no Ironic: a child would call it unfenced, which only --unfenced allows.
      [
        ["--id", "host-a", "--shard", SHARD, ...base, "--", RUN_CHILD],
        /fronts no Ironic \(serve --ironic\), so .* would call Ironic unfenced: start the bridge with --ironic, or give --unfenced/,
      ],
    ];
    for (const [args, message] of cases) {
      const result = run(...args);
      expect(result.status, result.stderr).to.equal(2);
      expect(result.stderr).to.match(message);
    }
    expect(readFileSync(records, "utf8"), "no child ever started").to.equal("");
  });
});

/**
 * The same two supervisors on a bridge backed by a real redis-server, through the faults
 * of what they depend on: the bridge killed and started again, and Redis restarted empty.
 */
describe("shardbridge run through bridge and Redis restarts (real redis-server)", function () {
  this.timeout(90_000);
  let redis: TestRedisServer;
  let bridge: BridgeProcess;
  let records: string;
  let supervisors: AgentProcess[] = [];
  let watch: ReturnType<typeof watchChildren>;

  beforeEach(async () => {
    redis = await TestRedisServer.start();
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
      store: redis.url,
    });
    records = join(bridge.dir, "records.txt");
    writeFileSync(records, "");
    watch = watchChildren(records);
    for (const host of ["host-a", "host-b"]) supervisors.push(runFixture(host, SHARD, bridge, records));
    // The store is new: it grants the shard one TTL after its start.
    await Promise.race(supervisors.map((s) => s.waitFor((e) => e.ev === "child-started", 15_000)));
  });
  afterEach(async () => {
    for (const s of supervisors) await s.kill();
    supervisors = [];
    watch.stop();
    await bridge?.stop();
    await redis?.stop();
  });
  const untilNoneRunning = async () => {
    const deadline = performance.now() + 3000;
    while (lives(records).some((l) => running(l.pid)) && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
  };
  /** How long after `sinceMs` (performance.now) some child, not one of `earlier`, is running. */
  const untilRunning = async (sinceMs: number, timeoutMs: number, earlier = new Set<number>()) => {
    for (;;) {
      if (lives(records).some((l) => !earlier.has(l.pid) && running(l.pid)))
        return performance.now() - sinceMs;
      if (performance.now() - sinceMs > timeoutMs) throw new Error(`no child running within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it("the bridge killed -9 and started again: never two children, one runs again soon after it is back", async () => {
    await bridge.restart();
    const back = performance.now();
    const againMs = await untilRunning(back, TTL_MS + 1000);
    await new Promise((r) => setTimeout(r, TTL_MS));
    expect(watch.overlaps, "instants with two children running").to.deep.equal([]);
    console.log(
      `      a child running ${againMs.toFixed(0)} ms after the bridge was back (${lives(records).length} children in all)`,
    );
  });

  it("supervisors started while the bridge is down wait for it (no exit, no child), and one runs the child once it is up", async () => {
    for (const s of supervisors) await s.kill();
    await untilNoneRunning();
    await bridge.serve.kill();
    supervisors = ["host-a", "host-b"].map((host) => runFixture(host, SHARD, bridge, records));
    await supervisors[0]!.waitFor((e) => e.ev === "bridge-unreachable", 15_000);
    await new Promise((r) => setTimeout(r, 1000));
    for (const s of supervisors)
      expect(s.child.exitCode, "a supervisor gave up on the bridge").to.equal(null);
    const before = new Set(lives(records).map((l) => l.pid));
    await bridge.restart();
    const againMs = await untilRunning(performance.now(), TTL_MS + 3000, before);
    console.log(`      a child running ${againMs.toFixed(0)} ms after the bridge came up`);
    expect(watch.overlaps, "instants with two children running").to.deep.equal([]);
  });

  it("redis-server restarted empty: the holder's child is stopped, one runs again after the recovery wait, never two", async () => {
    const before = new Set(lives(records).map((l) => l.pid));
    await redis.kill();
    await redis.restart();
    const back = performance.now();
    // Renews find no lease: the holder is told to stop and its child goes; the store
    // grants the shard again one TTL after its start.
    const supervisorsLost = await Promise.race(
      supervisors.map((s) => s.waitFor((e) => e.ev === "lost", 10_000)),
    );
    expect(supervisorsLost).to.not.equal(undefined);
    // A new child, not the old one still on its way out.
    const againMs = await untilRunning(back, TTL_MS + 3000, before);
    await new Promise((r) => setTimeout(r, 500));
    expect(watch.overlaps, "instants with two children running").to.deep.equal([]);
    expect(lives(records).length, "a new child, under a new token").to.be.greaterThan(before.size);
    console.log(`      a new child running ${againMs.toFixed(0)} ms after redis-server was back`);
  });
});
