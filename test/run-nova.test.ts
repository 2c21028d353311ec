import { expect } from "chai";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentProcess } from "./helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { createIronicNode, useIronicPeer } from "./helpers/ironic-peer.js";

const STANDIN = fileURLToPath(new URL("./fixtures/nova_standin.py", import.meta.url));
const CLI = fileURLToPath(new URL("../src/cli.ts", import.meta.url));
const TTL_MS = 2000;
const SHARD = "rack-n";
const IRONIC = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };

interface StandinRecord {
  pid: number;
  token: string;
  ev: "start" | "write";
  ok?: boolean;
  status?: number;
  sent?: number;
  received?: number;
  endpoint?: string;
  host?: string;
  shard?: string;
}

/**
 * nova-compute's place taken by a Python stand-in that reads its options with the real
 * oslo.config and writes to the real Ironic with openstacksdk, under `shardbridge run`,
 * through the bridge's fenced endpoint. Ironic's own record of the writes (the node's
 * extra/log, appended by each write) must never show an older token after a newer one.
 */
describe("shardbridge run with a nova-compute stand-in (real oslo.config, openstacksdk, Ironic)", function () {
  this.timeout(400_000);
  const peer = useIronicPeer("nova stand-in tests");
  let bridge: BridgeProcess;
  let node: string;
  let records: string;
  let supervisors: AgentProcess[] = [];

  before(async () => {
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
      args: ["--ironic", peer.peer.endpoint],
    });
  });
  after(async () => bridge?.stop());
  beforeEach(async () => {
    node = await createIronicNode(peer.peer.endpoint, { name: `standin-${Date.now()}`, shard: SHARD });
    await fetch(`${peer.peer.endpoint}/v1/nodes/${node}`, {
      method: "PATCH",
      headers: IRONIC,
      body: JSON.stringify([{ op: "add", path: "/extra/log", value: [] }]),
    });
    records = join(bridge.dir, `standin-${Date.now()}.jsonl`);
    writeFileSync(records, "");
  });
  afterEach(async () => {
    for (const s of supervisors) {
      s.signal("SIGCONT");
      await s.kill();
    }
    supervisors = [];
  });

  /** A supervisor in a session of its own (setsid), so its whole group can be stopped. */
  const supervise = (host: string) => {
    const s = AgentProcess.spawnCommand(
      host,
      "setsid",
      [
        ...[process.execPath, "--import", "tsx", CLI, "run", "--id", host, "--shard", SHARD],
        ...["--bridge", bridge.url, "--tokens-file", bridge.tokensFile, "--", "/usr/bin/python3", STANDIN],
      ],
      { STANDIN_NODE: node, STANDIN_RECORDS: records },
    );
    supervisors.push(s);
    return s;
  };
  const read = (): StandinRecord[] =>
    readFileSync(records, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as StandinRecord);
  const accepted = (token: string) => read().filter((r) => r.ev === "write" && r.ok && r.token === token);
  const untilAccepted = async (token: string, timeoutMs: number) => {
    const deadline = performance.now() + timeoutMs;
    while (accepted(token).length === 0) {
      if (performance.now() > deadline)
        throw new Error(`no accepted write under ${token} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  /** Ironic's own order of the writes: never an older token after a newer one. */
  const ironicLog = async (): Promise<string[]> => {
    const res = await fetch(`${peer.peer.endpoint}/v1/nodes/${node}?fields=extra`, { headers: IRONIC });
    return ((await res.json()) as any).extra.log as string[];
  };
  const expectNoStaleWrite = (log: string[]) => {
    let newest = 0;
    for (const [i, entry] of log.entries()) {
      const token = Number(entry.split(":")[0]);
      expect(token, `Ironic's log entry ${i} (${entry}) is older than a write before it`).to.be.at.least(
        newest,
      );
      newest = token;
    }
  };
  const fencedRefusals = async () => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    const line = new RegExp(
      `^shardbridge_fenced_requests_total\\{shard="${SHARD}",outcome="refused"\\} (\\d+)`,
      "m",
    );
    return Number(line.exec(text)?.[1] ?? 0);
  };
  const activeOf = async (a: AgentProcess, b: AgentProcess) => {
    const first = await Promise.race(
      [a, b].map((s) => s.waitFor((e) => e.ev === "child-started", 20_000).then(() => s)),
    );
    const token = String((await first.waitFor((e) => e.ev === "child-started", 1)).token);
    await untilAccepted(token, 15_000);
    return { active: first, standby: first === a ? b : a, token };
  };

  it("the stand-in reads host, shard and the fenced endpoint through oslo.config, and writes through it", async () => {
    const { token } = await activeOf(supervise("host-a"), supervise("host-b"));
    const start = read().find((r) => r.ev === "start" && r.token === token)!;
    expect(start).to.include({ host: `${SHARD}-ironic`, shard: SHARD });
    expect(start.endpoint).to.equal(`${bridge.url}/fenced/${SHARD}/lease-${token}/ironic`);
    expectNoStaleWrite(await ironicLog());
  });

  it("kill -9 of the active supervisor: the standby's stand-in writes within TTL + its start-up, and no stale write lands", async () => {
    const { active, standby, token } = await activeOf(supervise("host-a"), supervise("host-b"));
    active.signal("SIGKILL");
    const killedAt = Date.now() / 1000;
    const next = String((await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 2000)).token);
    await untilAccepted(next, 15_000);
    const firstNew = accepted(next)[0]!;
    const lastOld = accepted(token).at(-1)!;
    console.log(
      `      first accepted write under the new token ${((firstNew.received! - killedAt) * 1000).toFixed(0)} ms after kill -9 ` +
        `(last old one ${((killedAt - lastOld.received!) * 1000).toFixed(0)} ms before it)`,
    );
    expectNoStaleWrite(await ironicLog());
  });

  it("the whole group frozen past the TTL, then resumed: the old stand-in's writes are refused at the fence", async () => {
    const { active, standby, token } = await activeOf(supervise("host-a"), supervise("host-b"));
    const child = Number((await active.waitFor((e) => e.ev === "child-started", 1)).pid);
    // Supervisor and watchdog (their session) and the stand-in (its own group): all of it.
    process.kill(-active.child.pid!, "SIGSTOP");
    process.kill(-child, "SIGSTOP");
    const frozenAt = Date.now() / 1000;
    const next = String((await standby.waitFor((e) => e.ev === "child-started", TTL_MS + 3000)).token);
    await untilAccepted(next, 15_000);
    // The stand-in wakes first and its supervisor half a second later (starved longer):
    // for that half second nothing on the host stops it, and only the fence stands
    // between its old token and Ironic.
    const refusedBefore = await fencedRefusals();
    process.kill(-child, "SIGCONT");
    await new Promise((r) => setTimeout(r, 500));
    process.kill(-active.child.pid!, "SIGCONT");
    await active.waitFor((e) => e.ev === "child-stopped", 5000);
    // The bridge's own count: openstacksdk retries a 409 (as it would a locked node), so
    // the stand-in hears of its refusal only after its backoff, if it lives that long.
    const refused = (await fencedRefusals()) - refusedBefore;
    console.log(`      the resumed stand-in's writes refused at the fence: ${refused}`);
    expect(refused, "the resumed stand-in wrote, and the fence refused it").to.be.greaterThan(0);
    expect(read().filter((r) => r.token === token && r.ok === true && r.sent! > frozenAt)).to.deep.equal([]);
    expectNoStaleWrite(await ironicLog());
  });
});
