import { expect } from "chai";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { createIronicNode, useIronicPeer } from "../helpers/ironic-peer.js";
import { freezeHost, watchOverlaps } from "../helpers/processes.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { SHARDBRIDGE } from "../helpers/cli.js";

const STANDIN = fileURLToPath(new URL("../fixtures/nova_standin.py", import.meta.url));
const TTL_MS = 2000;
const SHARD = "rack-n";
const IRONIC = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };

interface StandinRecord {
  pid: number;
  token: string;
  ev: "start" | "write" | "exit";
  ok?: boolean;
  status?: number | null;
  sent?: number;
  received?: number;
  endpoint?: string;
  host?: string;
  shard?: string;
}

/**
 * What every case needs: two supervisors on one shard guarding the stand-in, its records,
 * Ironic's own record of the writes, and a watch on the stand-ins that are running.
 */
function standinHarness(ironic: () => string, bridge: () => BridgeProcess) {
  let node = "";
  let records = "";
  let supervisors: AgentProcess[] = [];
  let watch: ReturnType<typeof watchOverlaps> | null = null;

  const read = (): StandinRecord[] =>
    readFileSync(records, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as StandinRecord);
  const accepted = (token: string) => read().filter((r) => r.ev === "write" && r.ok && r.token === token);

  const h = {
    get node() {
      return node;
    },
    get records() {
      return records;
    },
    read,
    accepted,
    /** A fresh node of the shard with an empty extra/log, fresh records, a new watch. */
    async setUp(): Promise<void> {
      node = await createIronicNode(ironic(), { name: `standin-${Date.now()}`, shard: SHARD });
      await fetch(`${ironic()}/v1/nodes/${node}`, {
        method: "PATCH",
        headers: IRONIC,
        body: JSON.stringify([{ op: "add", path: "/extra/log", value: [] }]),
      });
      records = join(bridge().dir, `standin-${Date.now()}.jsonl`);
      writeFileSync(records, "");
      // Every stand-in that ever started, by its own start record: never two running.
      watch = watchOverlaps(() =>
        read()
          .filter((r) => r.ev === "start")
          .map((r) => ({ pid: r.pid, label: r.token })),
      );
    },
    async tearDown(): Promise<void> {
      for (const s of supervisors) {
        s.signal("SIGCONT");
        await s.kill();
      }
      supervisors = [];
      watch?.stop();
    },
    /** A supervisor in a session of its own (setsid), so its whole group can be stopped. */
    supervise(host: string, env: Record<string, string> = {}): AgentProcess {
      const s = AgentProcess.spawnCommand(
        host,
        "setsid",
        [
          ...[SHARDBRIDGE.command, ...SHARDBRIDGE.args, "run", "--id", host, "--shard", SHARD],
          ...[
            "--bridge",
            bridge().url,
            "--tokens-file",
            bridge().tokensFile,
            "--",
            "/usr/bin/python3",
            STANDIN,
          ],
        ],
        { STANDIN_NODE: node, STANDIN_RECORDS: records, ...env },
      );
      supervisors.push(s);
      return s;
    },
    async untilAccepted(token: string, timeoutMs: number): Promise<void> {
      const deadline = performance.now() + timeoutMs;
      while (accepted(token).length === 0) {
        if (performance.now() > deadline)
          throw new Error(`no accepted write under ${token} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    /** Both supervisors; which one is active, once its stand-in's first write was accepted. */
    async pair(env: Record<string, string> = {}) {
      const a = h.supervise("host-a", env);
      const b = h.supervise("host-b", env);
      const first = await Promise.race(
        [a, b].map((s) => s.waitFor((e) => e.ev === "child-started", 20_000).then(() => s)),
      );
      const token = String((await first.waitFor((e) => e.ev === "child-started", 1)).token);
      await h.untilAccepted(token, 15_000);
      return { active: first, standby: first === a ? b : a, token };
    },
    /** The token the standby's child starts under, within `withinMs`; and its first accepted write. */
    async takeover(standby: AgentProcess, faultAt: number, withinMs: number) {
      const started = await standby.waitFor((e) => e.ev === "child-started", withinMs);
      const startedMs = performance.now() - faultAt;
      const token = String(started.token);
      await h.untilAccepted(token, 15_000);
      return { token, startedMs };
    },
    /** Ironic's own order of the writes: the node's extra/log, appended by each write. */
    async ironicLog(): Promise<string[]> {
      const res = await fetch(`${ironic()}/v1/nodes/${node}?fields=extra`, { headers: IRONIC });
      return (await res.json()).extra.log as string[];
    },
    /**
     * The two safety claims, from the participants' own records: no instant with two
     * stand-ins running, and no write under an older token landed in Ironic after one
     * under a newer token.
     */
    async expectSafe(): Promise<void> {
      expect(watch!.overlaps, "instants with two stand-ins running").to.deep.equal([]);
      const log = await h.ironicLog();
      let newest = 0;
      for (const [i, entry] of log.entries()) {
        const token = Number(entry.split(":")[0]);
        expect(token, `Ironic's log entry ${i} (${entry}) is older than a write before it`).to.be.at.least(
          newest,
        );
        newest = token;
      }
      expect(new Set(log.map((e) => e.split(":")[0])).size, "tokens that wrote to Ironic").to.be.at.least(1);
    },
    /** Seconds of the epoch, as the stand-in records them. */
    firstAcceptedMsAfter(token: string, epochS: number): number {
      return (h.accepted(token)[0]!.received! - epochS) * 1000;
    },
  };
  return h;
}

async function fencedRefusals(bridgeUrl: string): Promise<number> {
  const text = await (await fetch(`${bridgeUrl}/metrics`)).text();
  const line = new RegExp(
    `^shardbridge_fenced_requests_total\\{shard="${SHARD}",outcome="refused"\\} (\\d+)`,
    "m",
  );
  return Number(line.exec(text)?.[1] ?? 0);
}

/**
 * nova-compute's place taken by a Python stand-in that reads its options with the real
 * oslo.config and writes to the real Ironic with openstacksdk, under `shardbridge run`,
 * through the bridge's fenced endpoint. In every fault: never two stand-ins running (a
 * 10 ms poll of their pids), the standby's one started within TTL + 1 s, and Ironic's own
 * record of the writes never shows an older token after a newer one.
 */
describe("shardbridge run with a nova-compute stand-in (real oslo.config, openstacksdk, Ironic)", function () {
  this.timeout(400_000);
  const peer = useIronicPeer("nova stand-in tests");

  describe("on one bridge", () => {
    let bridge: BridgeProcess;
    const h = standinHarness(
      () => peer.peer.endpoint,
      () => bridge,
    );

    before(async () => {
      bridge = await startBridge({
        shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
        agents: ["host-a", "host-b"],
        args: ["--ironic", peer.peer.endpoint],
      });
    });
    after(async () => bridge?.stop());
    beforeEach(() => h.setUp());
    afterEach(() => h.tearDown());

    it("the stand-in reads host, shard and the fenced endpoint through oslo.config, and writes through it", async () => {
      const { token } = await h.pair();
      const start = h.read().find((r) => r.ev === "start" && r.token === token)!;
      expect(start).to.include({ host: `${SHARD}-ironic`, shard: SHARD });
      expect(start.endpoint).to.match(
        new RegExp(`^${bridge.url}/fenced/${SHARD}/lease-${token}-[0-9a-f]{32}/ironic$`),
      );
      await h.expectSafe();
    });

    it("kill -9 of the active supervisor: the standby's stand-in writes within TTL + its start-up, and no stale write lands", async () => {
      const { active, standby, token } = await h.pair();
      active.signal("SIGKILL");
      const killedAt = performance.now();
      const killedEpoch = Date.now() / 1000;
      const next = await h.takeover(standby, killedAt, TTL_MS + 1000);
      const lastOld = h.accepted(token).at(-1)!;
      console.log(
        `      standby's child started ${next.startedMs.toFixed(0)} ms after kill -9; first accepted write under ` +
          `the new token ${h.firstAcceptedMsAfter(next.token, killedEpoch).toFixed(0)} ms after it ` +
          `(last old one ${((killedEpoch - lastOld.received!) * 1000).toFixed(0)} ms before it)`,
      );
      await h.expectSafe();
    });

    it("SIGSTOP of the active supervisor alone past the TTL: its watchdog kills the stand-in before the standby starts one", async () => {
      const { active, standby } = await h.pair();
      active.signal("SIGSTOP");
      const stoppedAt = performance.now();
      const next = await h.takeover(standby, stoppedAt, TTL_MS + 1000);
      console.log(`      standby's child started ${next.startedMs.toFixed(0)} ms after SIGSTOP`);
      active.signal("SIGCONT");
      // Woken, it finds its deadline passed and stands by: no second stand-in of its own.
      await active.waitFor((e) => e.ev === "lost", 5000);
      await new Promise((r) => setTimeout(r, 1000));
      expect(active.events.filter((e) => e.ev === "child-started")).to.have.length(1);
      await h.expectSafe();
    });

    it("the whole group frozen past the TTL, then resumed: the old stand-in's writes are refused at the fence", async () => {
      const { active, standby, token } = await h.pair();
      await active.waitFor((e) => e.ev === "child-started", 1);
      // Supervisor and watchdog (their session) and the stand-in (its own group): all of it.
      const frozen = freezeHost(active);
      const frozenAt = Date.now() / 1000;
      await h.takeover(standby, performance.now(), TTL_MS + 1000);
      // The stand-in wakes first and its supervisor half a second later (starved longer):
      // for that half second nothing on the host stops it, and only the fence stands
      // between its old token and Ironic. (The watch sees two stand-ins alive then: that
      // overlap is this case's premise, so it is judged by Ironic's record alone.)
      const refusedBefore = await fencedRefusals(bridge.url);
      await frozen.wake(500);
      await active.waitFor((e) => e.ev === "child-stopped", 5000);
      // The bridge's own count: openstacksdk retries a 409 (as it would a locked node), so
      // the stand-in hears of its refusal only after its backoff, if it lives that long.
      const refused = (await fencedRefusals(bridge.url)) - refusedBefore;
      console.log(`      the resumed stand-in's writes refused at the fence: ${refused}`);
      expect(refused, "the resumed stand-in wrote, and the fence refused it").to.be.greaterThan(0);
      expect(h.read().filter((r) => r.token === token && r.ok === true && r.sent! > frozenAt)).to.deep.equal(
        [],
      );
      const log = await h.ironicLog();
      let newest = 0;
      for (const entry of log) {
        expect(Number(entry.split(":")[0]), `stale write ${entry} in Ironic`).to.be.at.least(newest);
        newest = Number(entry.split(":")[0]);
      }
    });

    it("SIGTERM to the active supervisor: the stand-in is stopped, the lease handed back, the standby's starts at once", async () => {
      const { active, standby } = await h.pair();
      active.signal("SIGTERM");
      const next = await h.takeover(standby, performance.now(), TTL_MS + 1000);
      await active.exited();
      expect(active.child.exitCode).to.equal(0);
      expect(
        active.events.map((e) => e.ev),
        "handed back, not run out",
      ).to.include("released");
      console.log(`      standby's child started ${next.startedMs.toFixed(0)} ms after SIGTERM`);
      await h.expectSafe();
    });

    it("the stand-in exits by itself: its supervisor releases the lease and exits with its code, the standby takes over", async () => {
      const once = join(bridge.dir, `exit-once-${Date.now()}`);
      writeFileSync(once, "");
      const { active, standby } = await h.pair({ STANDIN_EXIT_ONCE: once });
      await active.exited();
      const exitedAt = performance.now();
      expect(active.child.exitCode).to.equal(3);
      expect(existsSync(once)).to.equal(false);
      expect(
        active.events.map((e) => e.ev),
        "handed back, not run out",
      ).to.include("released");
      const next = await h.takeover(standby, exitedAt, TTL_MS + 1000);
      console.log(
        `      standby's child started ${next.startedMs.toFixed(0)} ms after the first supervisor exited`,
      );
      await h.expectSafe();
    });
  });

  /**
   * The same, on a bridge backed by a real redis-server, through the faults of what the
   * supervisors depend on: the bridge killed -9 and started again, and Redis restarted empty.
   */
  describe("through bridge and Redis restarts (real redis-server)", () => {
    let redis: TestRedisServer;
    let bridge: BridgeProcess;
    const h = standinHarness(
      () => peer.peer.endpoint,
      () => bridge,
    );

    beforeEach(async () => {
      redis = await TestRedisServer.start();
      bridge = await startBridge({
        shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
        agents: ["host-a", "host-b"],
        store: redis.url,
        args: ["--ironic", peer.peer.endpoint],
      });
      await h.setUp();
    });
    afterEach(async () => {
      await h.tearDown();
      await bridge?.stop();
      await redis?.stop();
    });

    /** Until a stand-in under a token newer than `token` has a write accepted; how long after `sinceMs`. */
    const untilNewerAccepted = async (token: string, sinceMs: number, timeoutMs: number) => {
      for (;;) {
        if (h.read().some((r) => r.ev === "write" && r.ok && Number(r.token) > Number(token)))
          return performance.now() - sinceMs;
        if (performance.now() - sinceMs > timeoutMs)
          throw new Error(`no newer token wrote within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    /** Until some stand-in under any token has a write accepted after `epochS`. */
    const untilWritingAgain = async (epochS: number, sinceMs: number, timeoutMs: number) => {
      for (;;) {
        if (h.read().some((r) => r.ev === "write" && r.ok && r.sent! > epochS))
          return performance.now() - sinceMs;
        if (performance.now() - sinceMs > timeoutMs)
          throw new Error(`no accepted write within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };

    it("the bridge killed -9 and started again: never two stand-ins, writes resume soon after it is back", async () => {
      await h.pair();
      await bridge.restart();
      const back = performance.now();
      const againMs = await untilWritingAgain(Date.now() / 1000, back, TTL_MS + 10_000);
      await new Promise((r) => setTimeout(r, TTL_MS));
      console.log(`      an accepted write ${againMs.toFixed(0)} ms after the bridge was back`);
      await h.expectSafe();
    });

    it("redis-server restarted empty: the holder's stand-in is stopped, a new token writes after the recovery wait, never two", async () => {
      const { token } = await h.pair();
      await redis.kill();
      await redis.restart();
      const back = performance.now();
      const againMs = await untilNewerAccepted(token, back, TTL_MS + 15_000);
      await new Promise((r) => setTimeout(r, 500));
      console.log(
        `      first accepted write under a new token ${againMs.toFixed(0)} ms after redis-server was back`,
      );
      await h.expectSafe();
    });
  });
});
