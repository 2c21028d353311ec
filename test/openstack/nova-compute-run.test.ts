import { expect } from "chai";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { untilBridgeDrained } from "../helpers/delivery.js";
import { postWebhook } from "../helpers/http.js";
import { freezeHost, ProcessTableWatch } from "../helpers/processes.js";
import { untilSome, untilTrue } from "../helpers/until.js";
import {
  ironicApi,
  NOVA_UPDATE_INTERVAL_S,
  sharedCloud,
  type OpenStackCloud,
} from "../helpers/openstack/cloud.js";
import { enrollAvailable } from "../helpers/openstack/nodes.js";
import { NOVA_PERIODIC_FUZZY_DELAY_S, SupervisedShard } from "../helpers/openstack/nova-compute.js";
import { nextUpdateOf, novaSaid, readNovaLog, requestsSent } from "../helpers/openstack/nova-log.js";
import { expectSameRecords, providers, shardRecords } from "../helpers/openstack/records.js";
import { RecordingProxy } from "../helpers/openstack/recording-proxy.js";
import { KeystoneAuth } from "../../src/upstream/keystone.js";
import { DEFAULT_STOP_GRACE_MS } from "../../src/agent/run/supervisor.js";
import { DEFAULT_OWNER_TTL_MS } from "../../src/bridge/ironic/delivery.js";
import { DEFAULT_RETRY_POLICY } from "../../src/bridge/ironic/delivery-policy.js";

const SHARD = "rack-n";
const HOST = `${SHARD}-ironic`;
const TTL_MS = 2000;
const EXAMPLES = new URL("../../examples/", import.meta.url);

/**
 * An inspection's traits reach Ironic by the bridge's delivery, which takes a commit at its
 * next poll (100 ms) and gives each Ironic call its owner TTL / 4: three attempts and the
 * backoffs between them (0.5 s, then 1 s), plus 1 s for the polls (the worker's and this
 * test's). A delivery slower than that needed more than three tries of a healthy Ironic.
 */
const TRAITS_TO_IRONIC_BOUND_MS =
  3 * (DEFAULT_OWNER_TTL_MS / 4) + DEFAULT_RETRY_POLICY.backoffMs * (1 + 2) + 1_000;

/**
 * nova-compute 34, unmodified, under two `shardbridge run` supervisors (host-a, host-b:
 * two hosts of one shard), against a real Ironic 39 behind the bridge's fenced endpoint and
 * a real placement. Every claim is read from the participants' own records: nova's cell
 * database (services, compute_nodes), placement's API, nova-compute's own log (each line
 * carries its pid), the supervisors' JSON lines, and the kernel's (which pids run).
 */
describe("nova-compute 34 active/passive under shardbridge run (real nova, Ironic 39, placement 16)", function () {
  this.timeout(600_000);
  let cloud: OpenStackCloud;
  let bridge: BridgeProcess;
  /** between the bridge and Ironic: what reached Ironic, with which token */
  let toIronic: RecordingProxy;
  let nodes: string[] = [];
  let others: string[] = [];
  let shard: SupervisedShard;
  let watch: ProcessTableWatch | null = null;

  before(async () => {
    cloud = await sharedCloud();
    nodes = await enrollAvailable(cloud, ["bm-n-0", "bm-n-1", "bm-n-2", "bm-n-3"], SHARD);
    // Nodes the shard's nova-compute must never report: another shard's, and one in none.
    others = [
      ...(await enrollAvailable(cloud, ["bm-o-0"], "rack-o")),
      ...(await enrollAvailable(cloud, ["bm-unsharded"], null)),
    ];
    // The bridge's --ironic is a plain forwarding proxy to the real Ironic that writes down
    // the X-Auth-Token of every call: the fenced endpoint's and the bridge's own delivery.
    toIronic = await RecordingProxy.start(cloud.ironic);
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
      // The bridge delivers traits to Ironic as its own keystone user (an application credential).
      env: cloud.bridgeEnv,
      args: [
        ...["--ironic", toIronic.url],
        ...["--trait-rules", new URL("trait-rules.json", EXAMPLES).pathname],
        ...["--ownership", new URL("ownership.json", EXAMPLES).pathname],
      ],
    });
    // With the kernel's egress fence, as the install steps can set it: a woken old
    // nova-compute's packets are refused from its lease's expiry on (the frozen cases below).
    shard = new SupervisedShard(cloud, bridge, SHARD, nodes, TTL_MS, { args: ["--egress-fence"] });
    const sync = await runShardbridge(
      [
        ...[
          "ironic-sync",
          "--ironic",
          cloud.ironic,
          "--bridge",
          bridge.url,
          "--token",
          bridge.tokenFor("admin"),
        ],
      ],
      cloud.bridgeEnv,
    );
    expect(sync.status, sync.stderr).to.equal(0);
  });
  after(async () => {
    await bridge?.stop();
    await toIronic?.stop();
  });
  beforeEach(async () => {
    // Every nova-compute of the shard's host in the process table, whoever started it.
    watch = await ProcessTableWatch.start({ command: "nova-compute", env: { OS_DEFAULT__HOST: HOST } });
  });
  afterEach(async () => {
    // What the supervisors started must be gone before the next case starts its own.
    const left = await shard.stopAll();
    await watch?.stop();
    expect(left, "nova-compute processes left behind by a killed supervisor").to.deep.equal([]);
  });

  it("the active nova-compute reports exactly its shard's nodes, with an inspection's traits on their providers", async () => {
    const { child } = await shard.pair();
    // An inspection through the bridge: its traits reach Ironic by the bridge's delivery,
    // and nova copies Ironic's traits to the provider at its next update.
    const data = JSON.parse(readFileSync(new URL("inspection-result.json", EXAMPLES), "utf8"));
    const sent = await postWebhook(
      bridge.url,
      {
        kind: "inspection",
        node: nodes[0],
        finished_at: new Date().toISOString(),
        data,
      },
      { token: bridge.tokenFor("inspector") },
    );
    expect(sent.status, JSON.stringify(sent.body)).to.equal(200);
    // What the bridge's trait rules made of the inventory: these must reach Ironic, then placement.
    const found = (sent.body.applied as string[]).filter((d) => d.startsWith("+")).map((d) => d.slice(1));
    expect(found, "traits the inspection added").to.include("CUSTOM_DEV_VENDORID_15B3");
    const sentAt = Date.now();
    /** Poll `read` every 250 ms until it holds every trait found, or `withinMs` passes; what it read last. */
    const untilHolds = async (read: () => Promise<string[]>, withinMs: number) => {
      const deadline = performance.now() + withinMs;
      let held = await read();
      while (!found.every((t) => held.includes(t)) && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        held = await read();
      }
      return held;
    };
    const inIronic = await untilHolds(
      async () => (await ironicApi(cloud, "GET", `/v1/nodes/${nodes[0]}/traits`)).traits,
      TRAITS_TO_IRONIC_BOUND_MS,
    );
    const ironicMs = Date.now() - sentAt;
    expect(inIronic, "the inspection's traits in Ironic").to.include.members(found);
    expect(ironicMs, "the traits in Ironic after the webhook (ms)").to.be.at.most(TRAITS_TO_IRONIC_BOUND_MS);
    const delivery = await untilBridgeDrained(
      bridge.url,
      bridge.tokenFor("admin"),
      TRAITS_TO_IRONIC_BOUND_MS,
    );
    expect(
      [delivery.batches.given_up, delivery.undeliverable],
      "the bridge's delivery: nothing given up, nothing undeliverable",
    ).to.deep.equal([0, []]);
    // nova copies Ironic's traits to the provider at a resource update: the first periodic
    // one that begins once they are in Ironic carries them. That is the claim held here,
    // from nova's own log, not a time. How long it takes is nova's schedule: the periodics
    // of a nova-compute just started begin up to periodic_fuzzy_delay after it (the 20-25 s
    // this case used to wait, and a CI run's 60), then every update_resources_interval.
    const inIronicAt = Date.now();
    const update = await untilSome(
      `nova-compute ${child.pid}'s first resource update of ${nodes[0]} begun after the traits reached Ironic`,
      () => nextUpdateOf(readNovaLog(cloud.novaComputeLog), child.pid, nodes[0]!, inIronicAt),
      (NOVA_PERIODIC_FUZZY_DELAY_S + NOVA_UPDATE_INTERVAL_S + 10) * 1000,
      250,
    );
    const onProvider = (await providers(cloud)).find((p) => p.uuid === nodes[0])?.traits ?? [];
    console.log(
      `      the inspection's traits in Ironic ${ironicMs} ms after the webhook (the bridge's batches: ${JSON.stringify(delivery.batches)}); ` +
        `nova's next resource update began ${update.startedAt - inIronicAt} ms after that and wrote the node's provider ` +
        `${update.writtenAt - update.startedAt} ms later (its periodics every ${NOVA_UPDATE_INTERVAL_S} s, begun up to ${NOVA_PERIODIC_FUZZY_DELAY_S} s after its start)`,
    );
    expect(
      onProvider,
      "the provider, written by nova's first update after the traits reached Ironic",
    ).to.include.members([...found, "COMPUTE_NODE", "OWNER_NOVA"]);

    const { services, computeNodes, providers: rps } = await shardRecords(cloud, HOST);
    expect(services.map((s) => [s.host, s.deleted])).to.deep.equal([[HOST, false]]);
    expect(
      computeNodes
        .filter((c) => !c.deleted)
        .map((c) => [c.uuid, c.host])
        .sort(),
    ).to.deep.equal(nodes.map((n) => [n, HOST]).sort());
    expect(rps.map((p) => p.uuid).sort(), "one provider per node, of this shard only").to.deep.equal(
      [...nodes].sort(),
    );
    for (const other of others) expect(computeNodes.map((c) => c.uuid)).not.to.include(other);
    // Every Ironic call nova made went through the fenced endpoint under its own token.
    const urls = requestsSent(readNovaLog(cloud.novaComputeLog), child.pid, 0).map((r) => r.url);
    const ironicCalls = urls.filter((u) => u.includes("/v1/nodes"));
    expect(ironicCalls.length).to.be.greaterThan(0);
    for (const url of ironicCalls)
      expect(url).to.match(
        new RegExp(`^${bridge.url}/fenced/${SHARD}/lease-${child.token}-[0-9a-f]{32}/ironic/`),
      );
    expect(watch!.overlaps()).to.deep.equal([]);
  });

  it("the fenced endpoint hands Ironic nova-compute's own token untouched and adds none: without one, Ironic's 401", async () => {
    const { child } = await shard.pair();
    const fenced = child.endpoint;
    const sha256 = (token: string) => createHash("sha256").update(token).digest("hex");
    const sent = requestsSent(readNovaLog(cloud.novaComputeLog), child.pid, 0).filter((r) =>
      r.url.startsWith(`${fenced}/`),
    );
    // Every call nova-compute's log shows through the fence carried a token (keystoneauth logs
    // its SHA-256) but version discovery (GET of the API's root, which Ironic serves to anyone).
    const discovery = (method: string, path: string) => method === "GET" && /^\/(v1\/?)?$/.test(path);
    const underFence = (url: string) => new URL(url).pathname.slice(new URL(fenced).pathname.length);
    expect(sent.length, "nova-compute's calls through the fence").to.be.greaterThan(0);
    expect(
      sent.filter((r) => r.tokenSha256 === null && !discovery(r.method, underFence(r.url))),
    ).to.deep.equal([]);
    await new Promise((r) => setTimeout(r, 2000)); // the last of them answered
    const received = toIronic.requests.map((r) => ({
      ...r,
      sha256: r.token === null ? null : sha256(r.token),
      pathname: new URL(r.path, "http://x").pathname,
    }));
    // ... and reached Ironic with exactly that token: the same method, path and token hash.
    for (const r of sent.filter((r) => r.tokenSha256 !== null))
      expect(
        received.some(
          (q) => q.method === r.method && q.pathname === underFence(r.url) && q.sha256 === r.tokenSha256,
        ),
        `${r.method} ${r.url} reached Ironic with nova-compute's token`,
      ).to.equal(true);
    // Whose is each token Ironic got? Keystone's answer: nova's for what came through the
    // fence, the bridge's own only on its deliveries of traits; none went without one but discovery.
    const novaHashes = new Set(sent.map((r) => r.tokenSha256));
    const owners = new Map<string, string>();
    for (const token of new Set(received.flatMap((r) => (r.token === null ? [] : [r.token])))) {
      const who = await cloud.keystone.whose(token);
      owners.set(token, who === null ? "(invalid)" : `${who.user}@${who.project}`);
    }
    expect(
      received.filter((r) => r.token === null && !(discovery(r.method, r.pathname) && r.status === 200)),
      "calls that reached Ironic without a token",
    ).to.deep.equal([]);
    for (const r of received.filter((r) => r.token !== null)) {
      const owner = owners.get(r.token!);
      if (novaHashes.has(r.sha256)) expect(owner, `${r.method} ${r.path}`).to.equal("nova@service");
      else if (owner === "shardbridge@service")
        expect(`${r.method} ${r.pathname}`, "the bridge's own token only on its deliveries").to.match(
          /^(PUT|DELETE) \/v1\/nodes\/[^/]+\/traits\/[A-Z0-9_]+$/,
        );
      else expect(owner, `${r.method} ${r.path}: a token of nova-compute's own`).to.equal("nova@service");
    }
    const counts = [...owners.values()].reduce(
      (c, o) => c.set(o, (c.get(o) ?? 0) + 1),
      new Map<string, number>(),
    );
    console.log(
      `      Ironic got ${received.length} calls: tokens by owner ${JSON.stringify(Object.fromEntries(counts))}; ` +
        `nova-compute logged ${sent.length} through the fence, ${sent.filter((r) => r.tokenSha256 === null).length} of them version discovery without a token`,
    );

    // Without a token: a read is answered by Ironic (401), not by the bridge.
    let mark = toIronic.requests.length;
    /** What reached Ironic since `mark`. */
    const since = () =>
      toIronic.requests.slice(mark).map(({ method, path, token, status }) => [method, path, token, status]);
    const version = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };
    const read = await fetch(`${fenced}/v1/nodes/${nodes[0]}`, { headers: version });
    expect(read.status, "a read without a token").to.equal(401);
    expect(since()).to.deep.equal([["GET", `/v1/nodes/${nodes[0]}`, null, 401]]);
    // A write under the live lease without a token: the fence's own look-up of the node goes
    // with the caller's (no) credentials, Ironic's 401 to it is the answer, and the write never
    // reaches Ironic.
    mark = toIronic.requests.length;
    const trait = `/v1/nodes/${nodes[0]}/traits/CUSTOM_FENCED_NO_TOKEN`;
    const write = await fetch(`${fenced}${trait}`, { method: "PUT", headers: version });
    expect(write.status, "a write without a token").to.equal(401);
    expect(write.headers.get("www-authenticate"), "Ironic's (keystonemiddleware's) answer").to.match(
      /Keystone/i,
    );
    expect(since()).to.deep.equal([["GET", `/v1/nodes/${nodes[0]}?fields=uuid,shard`, null, 401]]);
    // The same write with a token of nova's user: the look-up and the write carry exactly it.
    const novaToken = await new KeystoneAuth(cloud.keystone.credentials("nova")).token();
    mark = toIronic.requests.length;
    const allowed = await fetch(`${fenced}${trait}`, {
      method: "PUT",
      headers: { ...version, "x-auth-token": novaToken },
    });
    expect(allowed.status, await allowed.text()).to.equal(204);
    expect(since()).to.deep.equal([
      ["GET", `/v1/nodes/${nodes[0]}?fields=uuid,shard`, novaToken, 200],
      ["PUT", trait, novaToken, 204],
    ]);
    await ironicApi(cloud, "DELETE", trait);
  });

  it("kill -9 of the active supervisor: the standby's nova-compute takes over the same records and reports every node", async () => {
    const { active, standby } = await shard.pair();
    const before = await shardRecords(cloud, HOST);
    active.signal("SIGKILL");
    await shard.takeover("kill -9", standby, Date.now());
    expectSameRecords(before, await shardRecords(cloud, HOST));
    expect(watch!.overlaps(), "instants with two nova-computes for the shard").to.deep.equal([]);
  });

  it("SIGSTOP of the active supervisor alone: its watchdog kills nova-compute before the standby's starts", async () => {
    const { active, standby } = await shard.pair();
    const before = await shardRecords(cloud, HOST);
    active.signal("SIGSTOP");
    await shard.takeover("SIGSTOP", standby, Date.now());
    active.signal("SIGCONT");
    await active.waitFor((e) => e.ev === "lost", 5000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(
      active.events.filter((e) => e.ev === "child-started"),
      "a second child of the woken supervisor",
    ).to.have.length(1);
    expectSameRecords(before, await shardRecords(cloud, HOST));
    expect(watch!.overlaps()).to.deep.equal([]);
  });

  /**
   * The host frozen whole (supervisor, watchdog, nova-compute) past the TTL and woken after
   * the failover: at once, or nova-compute a second before its supervisor (starved longer),
   * when nothing on the host can stop it. What the old nova-compute sends meanwhile is read
   * from its own log: HTTP requests (keystoneauth's) and RPC calls to the conductor.
   */
  for (const supervisorLagMs of [0, 1000])
    it(`the whole group frozen past the TTL, resumed after the failover${supervisorLagMs > 0 ? `, nova-compute ${supervisorLagMs} ms before its supervisor` : ""}: what the old nova-compute sends before it dies`, async () => {
      const { active, standby, child } = await shard.pair();
      const before = await shardRecords(cloud, HOST);
      const frozenAt = Date.now();
      const frozen = freezeHost(active);
      await shard.takeover("host frozen", standby, frozenAt);
      // Let the old one's periodic tasks fall due while frozen.
      await new Promise((r) => setTimeout(r, NOVA_UPDATE_INTERVAL_S * 1000));
      const resumedAt = Date.now();
      await frozen.wake(supervisorLagMs);
      const stopped = await active.waitFor((e) => e.ev === "child-stopped", 10_000);
      const goneAfterMs = Date.now() - resumedAt;
      // Its connections reset once it was gone (RabbitMQ requeues what it had delivered
      // there) and none left holding what it wrote after the cut: only then may the table
      // go. What the kernel stopped of it: the table's counters, read as it went.
      const reset = await active.waitFor(
        (e) => e.ev === "egress-fence-reset" && String(e.token) === child.token,
        10_000,
      );
      expect(reset.left, "sockets of the old nova-compute left after the reset").to.equal(0);
      const unfenced = await active.waitFor(
        (e) => e.ev === "egress-fence-removed" && String(e.token) === child.token,
        10_000,
      );
      // Woken past the lease's expiry, the supervisor grants no grace: KILL at once.
      expect(stopped, "the supervisor's record of the stop").to.include({ grace_ms: 0, killed: true });
      const log = readNovaLog(cloud.novaComputeLog);
      const sent = requestsSent(log, child.pid, resumedAt);
      const rpc = log.flatMap((l) => {
        const m = /^Calling RPC method (\S+) on target (\S+)/.exec(l.message);
        return l.pid === child.pid && l.at >= resumedAt && m !== null ? [`${m[2]}.${m[1]}`] : [];
      });
      /** Each kind of call once, with how often: ids and queries dropped. */
      const tally = (calls: string[]) => {
        const counts = new Map<string, number>();
        for (const c of calls) counts.set(c, (counts.get(c) ?? 0) + 1);
        return [...counts].map(([c, n]) => `${n}x ${c}`).join(", ") || "nothing";
      };
      const shape = (w: { method: string; url: string }) =>
        `${w.method} ${new URL(w.url).pathname.replace(/lease-\d+-[0-9a-f]+/, "lease-N").replace(/[0-9a-f-]{36}/g, "ID")}`;
      const answered = log.filter(
        (l) => l.pid === child.pid && l.at >= resumedAt && l.message.startsWith("RESP:"),
      );
      console.log(
        `      resumed: the old nova-compute was gone ${goneAfterMs} ms after its SIGCONT; meanwhile it tried ` +
          `over HTTP ${tally(sent.map(shape))}; over RPC ${tally(rpc)}; the kernel stopped ` +
          `${unfenced.rejected_packets} of its packets; ${answered.length} HTTP answers reached it; ` +
          `${String(reset.connections)} of its connections reset after its end`,
      );
      // Woken a second before its supervisor, it ran a resource update: every packet it sent
      // from then on met the rule (the lease had expired while it was frozen).
      if (supervisorLagMs > 0)
        expect(
          unfenced.rejected_packets,
          "packets of the woken nova-compute the kernel stopped",
        ).to.be.at.least(1);
      // placement is not fenced: a write from the woken process would be double management.
      expect(
        sent.filter((w) => w.url.startsWith(cloud.placement) && w.method !== "GET").map(shape),
        "the woken nova-compute's writes to placement",
      ).to.deep.equal([]);
      for (const w of sent.filter((w) => w.url.includes("/fenced/")))
        expect(w.url, "the old nova-compute's Ironic calls go through its own (stale) fence").to.include(
          `/lease-${child.token}-`,
        );
      expectSameRecords(before, await shardRecords(cloud, HOST));
      // From the process table: while frozen, the old nova-compute did nothing beside the
      // new one; woken, it ran beside it only until its supervisor's KILL.
      const { problems, besideMs: beside } = watch!.frozenHostOverlaps(frozenAt, {
        pid: child.pid,
        at: resumedAt,
      });
      expect(problems, "nova-computes of the host running together").to.deep.equal([]);
      console.log(`      the process table: the woken nova-compute ran beside the new one for ${beside} ms`);
    });

  it("SIGTERM to the active supervisor: nova-compute stops by itself under the kept lease, then the lease handed back and the standby's starts at once", async () => {
    const { active, standby, child } = await shard.pair();
    // The stop of a started nova-compute: nova 34 reports its nodes before its RPC servers
    // run, and a TERM in between hangs its stop on its own start ("Possible hang: stop is
    // waiting for start to complete") until run's grace KILLs it. Its last start step logs
    // joining the service group.
    await untilTrue(
      "nova-compute's start complete",
      async () =>
        readNovaLog(cloud.novaComputeLog).some(
          (l) => l.pid === child.pid && l.message.startsWith("Join ServiceGroup membership"),
        ),
      60_000,
    );
    const before = await shardRecords(cloud, HOST);
    const from = active.events.length;
    const termAt = Date.now();
    active.signal("SIGTERM");
    // nova's own graceful stop, within run's stop grace (a deadline, not a measure); the
    // standby's nova-compute may start only after it, by the release.
    const stopped = await active.waitFor(
      (e) => e.ev === "child-stopped",
      DEFAULT_STOP_GRACE_MS + 10_000,
      from,
    );
    // What nova-compute said after its TERM, for whoever reads a stop that had to be KILLed.
    const said = () =>
      novaSaid(readNovaLog(cloud.novaComputeLog), (l) => l.pid === child.pid && l.at >= termAt, 240)
        .slice(-40)
        .join("\n        ");
    expect(
      stopped,
      `nova-compute's graceful stop (the supervisor's records: ${JSON.stringify(active.events.slice(from).map((e) => ({ ...e, seenAt: undefined })))}; nova-compute's last lines:\n        ${stopped.killed === true ? said() : ""})`,
    ).to.include({ killed: false });
    const next = await shard.takeover("SIGTERM", standby, termAt);
    expect(next.startedAt, "the standby's nova-compute started after the old one was gone").to.be.at.least(
      termAt + Number(stopped.term_to_gone_ms),
    );
    console.log(`      SIGTERM: nova-compute exited by itself ${stopped.term_to_gone_ms} ms after its TERM`);
    await active.exited();
    expect(
      active.events.map((e) => e.ev),
      "handed back, not run out",
    ).to.include("released");
    expectSameRecords(before, await shardRecords(cloud, HOST));
    expect(watch!.overlaps()).to.deep.equal([]);
  });
});
