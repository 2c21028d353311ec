import { expect } from "chai";
import fc from "fast-check";
import { spawnSync } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { parseTokens } from "../../src/runtime/tokens-file.js";
import { bridgeApp } from "../helpers/app.js";
import { AgentId, ShardName, hostKey } from "../../src/core/names.js";
import { memoryUnderTest, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority } from "../helpers/http.js";
import { runShardbridge } from "../helpers/cli.js";
import { until } from "../helpers/until.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { openstackVenv } from "../helpers/openstack/venv.js";

/** Ids that look alike, or that a URL, a terminal or nova changes: each refused, the reason said. */
const REFUSED_IDS: Array<[string, string, RegExp]> = [
  ["a Cyrillic а (U+0430) for a Latin a", "compute-\u0430", /"а" U\+0430 is not one of them/],
  ["a hyphen U+2010 for -", "compute\u20100", /U\+2010 is not one of them/],
  ["fullwidth letters", "\uff43ompute-0", /U\+FF43 is not one of them/],
  ["the Kelvin sign (nova's oslo.config takes it as a letter: one host with k)", "rack-\u212a", /U\+212A/],
  ["a bidi override (shows reversed)", "compute-\u202e0-a", /U\+202E is not one of them/],
  ["a zero-width space", "compute\u200b-0", /U\+200B/],
  ["a byte order mark", "\ufeffcompute-0", /U\+FEFF/],
  ["a line separator", "compute\u2028-0", /U\+2028/],
  ["a newline at the end (oslo.config's pattern takes it)", "compute-0\n", /U\+000A/],
  ["a slash", "rack/0", /"\/" U\+002F/],
  ["a space", "compute 0", /" " U\+0020/],
  ["the decomposed é (NFD)", "ne\u0301ud", /U\+0301/],
  [
    "a trailing dot (nova drops it: another host than the id)",
    "host.example.com.",
    /begin or end with a dot/,
  ],
  ["dots only", "..", /begin or end with a dot/],
  ["a label beginning with -", "-x", /begins or ends with "-"/],
  ["all digits", "1234", /all digits/],
  ["an IPv6 address with a zone", "fe80::1%eth0", /IPv6 without a zone/],
  ["a label over 63 characters", `${"a".repeat(64)}.example.com`, /63 characters/],
  ["over 253 characters", Array.from({ length: 64 }, () => "abc").join("."), /at most 253 characters/],
];

/**
 * A call with its path sent as written: fetch (and curl, and browsers) resolve `.` and `..`
 * segments, which is why the grammar refuses such names; node:http sends them verbatim,
 * so the bridge's own refusal can be seen.
 */
function verbatim(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  token = TEST_TOKENS.admin,
): Promise<{ status: number; body: any }> {
  const { hostname, port } = new URL(base);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port,
        method,
        path,
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload !== undefined && {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(payload),
          }),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode!, body: text === "" ? null : JSON.parse(text) }),
        );
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** Agent ids to try: host names, any text, whole graphemes, and the ones known to look alike or travel badly. */
const agentIds = fc.oneof(
  fc.domain(),
  fc.stringMatching(/^[A-Za-z0-9._-]{1,20}$/),
  fc.string({ minLength: 1, maxLength: 40 }),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }),
  fc.constantFrom(...REFUSED_IDS.map(([, id]) => id), "A1", "compute-0", "%2e%2e", "a?b", "a#b", "-x", "--"),
);

describe("One grammar of names: shard names and agent ids", () => {
  it("refuses names a URL cannot carry, ids that look like others, and says why", () => {
    for (const [what, id, reason] of REFUSED_IDS) {
      const parsed = AgentId.safeParse(id);
      expect(parsed.success, what).to.equal(false);
      expect(parsed.error!.issues[0]!.message, what).to.match(reason);
    }
    for (const name of [".", "..", "..."]) expect(ShardName.safeParse(name).success, name).to.equal(false);
    for (const id of [
      "compute-0",
      "Compute-A",
      "rack_1-ironic",
      "host.example.com",
      "a.b",
      "10.0.0.7",
      "fd00::7",
    ])
      expect(AgentId.safeParse(id).success, id).to.equal(true);
    for (const name of ["rack-a", "a.b", ".hidden", "rack_1."])
      expect(ShardName.safeParse(name).success).to.equal(true);
  });

  it("takes as an agent id only what nova takes as its [DEFAULT] host (oslo.config's HostDomain, from the venv), as it is", () => {
    const ids = fc.sample(
      fc.oneof(
        fc.domain(),
        fc.ipV4(),
        fc.ipV6(),
        fc.stringMatching(/^[A-Za-z0-9._:%-]{1,16}$/),
        fc.string({ minLength: 1, maxLength: 12 }),
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 8 }),
        fc.constantFrom(...REFUSED_IDS.map(([, id]) => id), "compute-\u0131", "a\u017fb", "\u0130x"),
      ),
      { numRuns: 20_000, seed: 20261204 },
    );
    // Whether oslo.config hands the value back unchanged: what nova would then call itself.
    const oslo = spawnSync(
      join(openstackVenv(), "bin", "python"),
      [
        "-c",
        "import json, sys\nfrom oslo_config import types\nt = types.HostDomain()\n" +
          "def taken(s):\n    try:\n        return t(s) == s\n    except ValueError:\n        return False\n" +
          "print(json.dumps([taken(s) for s in json.load(sys.stdin)]))",
      ],
      { input: JSON.stringify(ids), encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    expect(oslo.status, oslo.stderr).to.equal(0);
    const novaTakes = JSON.parse(oslo.stdout) as boolean[];
    const ours = ids.map((id) => AgentId.safeParse(id).success);
    const takenByUsOnly = ids.filter((id, i) => ours[i] && !novaTakes[i]);
    expect(takenByUsOnly, "ids nova would refuse or change").to.deep.equal([]);
    // Where nova takes what we refuse, it is one of the three documented places, none ASCII text.
    const refusedByUsOnly = ids.filter((id, i) => !ours[i] && novaTakes[i]);
    for (const id of refusedByUsOnly)
      expect(id, JSON.stringify(id)).to.match(/\n$|[\u0130\u0131\u017f\u212a]/);
    expect(ours.filter(Boolean).length, "ids taken").to.be.greaterThan(5000);
  });

  it("refuses a tokens file naming one agent in two cases (one host to nova), both shown", () => {
    const doc = JSON.stringify({
      tokens: [
        { role: "agent", agent: "a1", token: "token-of-a1-0123456789" },
        { role: "agent", agent: "a1", token: "token-of-a1-rotated-0123456789" },
        { role: "agent", agent: "A1", token: "token-of-A1-0123456789" },
      ],
    });
    expect(() => parseTokens(doc, "tokens file t.json")).to.throw(
      /tokens\[2\]\.agent: "A1" and tokens\[0\]\.agent "a1" are one host to nova/,
    );
  });

  describe("over HTTP (embedded store): the grammar is every route's", () => {
    const ctx = useApp(memoryUnderTest(), (store) => bridgeApp(store, { authority: testAuthority() }));

    it("an id the grammar takes round-trips through the heartbeat, the list and the node list; one it refuses is a 400 naming it", async () => {
      // Each spelling registered so far, by nova's host key: another spelling of one is a 409.
      const registered = new Map<string, string>();
      await fc.assert(
        fc.asyncProperty(agentIds, async (id) => {
          const path = `/v1/agents/${encodeURIComponent(id)}`;
          const beat = await verbatim(ctx.base, "POST", `${path}/heartbeat`, { shards: [] });
          const valid = AgentId.safeParse(id);
          if (!valid.success) {
            expect(beat.status, JSON.stringify(id)).to.equal(400);
            expect(beat.body.errors[0].detail).to.include(valid.error.issues[0]!.message);
            const listed = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents;
            expect(listed.map((a: { id: string }) => a.id)).to.not.include(id);
            return;
          }
          const twin = registered.get(hostKey(id));
          if (twin !== undefined && twin !== id) {
            expect(beat.status, JSON.stringify(id)).to.equal(409);
            expect(beat.body.errors[0].code).to.equal("shardbridge.agent.host_twin");
            const listed = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents;
            expect(listed.map((a: { id: string }) => a.id)).to.not.include(id);
            return;
          }
          registered.set(hostKey(id), id);
          expect(beat.status, JSON.stringify(id)).to.equal(200);
          expect(beat.body.agent).to.equal(id);
          const listed = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents;
          expect(listed.map((a: { id: string }) => a.id)).to.include(id);
          const nodes = await verbatim(ctx.base, "GET", `${path}/nodes`);
          expect(nodes.status, `${JSON.stringify(id)}: ${JSON.stringify(nodes.body)}`).to.equal(200);
        }),
        { numRuns: 150 },
      );
    });

    it("a shard name the grammar takes defines and reads back; one it refuses is a 400 everywhere, nothing written", async () => {
      const names = fc.oneof(
        fc.stringMatching(/^[a-zA-Z0-9_.-]{1,20}$/),
        fc.constantFrom(".", "..", "...", "None", "a b", "rack/a", "rack-%"),
      );
      await fc.assert(
        fc.asyncProperty(names, async (name) => {
          const at = encodeURIComponent(name);
          const defined = await verbatim(ctx.base, "PUT", `/v1/shard-definitions/${at}`, {});
          const shown = await verbatim(ctx.base, "GET", `/v1/shards/${at}`);
          if (!ShardName.safeParse(name).success) {
            expect(defined.status, JSON.stringify(name)).to.equal(400);
            expect(shown.status, JSON.stringify(name)).to.equal(400);
            const listed = (await call(`${ctx.base}/v1/shard-definitions`, "GET")).body.definitions;
            expect(listed.map((d: { name: string }) => d.name)).to.not.include(name);
            return;
          }
          expect(defined.status, JSON.stringify(name)).to.be.oneOf([200, 201]);
          expect(shown.body.name).to.equal(name);
          await verbatim(ctx.base, "DELETE", `/v1/shard-definitions/${at}`);
        }),
        { numRuns: 150 },
      );
    });
  });

  describe("through the commands, against a bridge process", function () {
    this.timeout(240_000);
    let bridge: BridgeProcess;
    before(async () => {
      bridge = await startBridge({ shards: [], agents: ["compute-0"] });
    });
    after(() => bridge?.stop());
    // What an argument vector can carry: no NUL (execve ends a string there).
    const arguable = (text: string) => !text.includes("\0");

    it("an id and a shard name the grammar takes: `agent` holds the lease and registers under them, as sent", async () => {
      const admin = bridge.tokenFor("admin");
      const hosts = new Set<string>();
      const ids = agentIds.filter((id) => arguable(id) && AgentId.safeParse(id).success);
      const shards = fc
        .stringMatching(/^[a-zA-Z0-9_.-]{1,40}$/)
        .filter((n) => ShardName.safeParse(n).success);
      await fc.assert(
        fc.asyncProperty(ids, shards, async (id, shard) => {
          fc.pre(!hosts.has(hostKey(id)));
          hosts.add(hostKey(id));
          const at = `${bridge.url}/v1/shard-definitions/${encodeURIComponent(shard)}`;
          expect((await call(at, "PUT", { lease_ttl_ms: 1000 }, admin)).status).to.be.oneOf([200, 201]);
          // `--flag=value`: a value that starts with a dash is the flag's, not another flag.
          const agent = AgentProcess.cli("agent", [
            ...["agent", `--id=${id}`, `--shard=${shard}`, "--bridge", bridge.url, "--token", admin],
          ]);
          try {
            await agent.waitFor((e) => e.ev === "active", 20_000);
            const lease = await call(
              `${bridge.url}/v1/shards/${encodeURIComponent(shard)}/lease`,
              "GET",
              undefined,
              admin,
            );
            expect(lease.body.lease.holder, JSON.stringify(id)).to.equal(id);
            // Its heartbeat, sent at start, names the shard it serves under the id as sent.
            await until(
              `${JSON.stringify(id)} listed serving ${shard}`,
              async () => (await call(`${bridge.url}/v1/agents`, "GET", undefined, admin)).body.agents,
              (agents: Array<{ id: string; serves: string[] }>) =>
                agents.some((a) => a.id === id && a.serves.includes(shard)),
              5000,
            );
          } finally {
            agent.signal("SIGTERM");
            await agent.exited();
          }
        }),
        { numRuns: 8 },
      );
    });

    it("one the grammar refuses: `agent` exits 2 with the words the routes use", async () => {
      const admin = bridge.tokenFor("admin");
      const refused = agentIds.filter((id) => arguable(id) && !AgentId.safeParse(id).success);
      await fc.assert(
        fc.asyncProperty(refused, async (id) => {
          const reason = AgentId.safeParse(id).error!.issues[0]!.message;
          const command = await runShardbridge([
            ...["agent", `--id=${id}`, "--shard=rack", "--bridge", bridge.url, "--token", admin],
          ]);
          expect(command.status, JSON.stringify(id)).to.equal(2);
          expect(command.stderr, JSON.stringify(id)).to.include(reason);
          const route = await verbatim(
            bridge.url,
            "POST",
            `/v1/agents/${encodeURIComponent(id)}/heartbeat`,
            { shards: [] },
            admin,
          );
          expect(route.status, JSON.stringify(id)).to.equal(400);
          expect(route.body.errors[0].detail).to.include(reason);
        }),
        { numRuns: 12 },
      );
    });
  });

  it("the commands refuse the same names with exit 2 and the same words (no crash, no retry for ever)", async () => {
    const [run, agent, derived] = await Promise.all([
      runShardbridge(["run", "--id", "h", "--shard", ".", "--token", "t", "--", "true"]),
      runShardbridge(["agent", "--id", "compute-\u202e0", "--shard", "..", "--token", "t"]),
      // A shard name nova's host cannot be made from: nova would refuse `.hidden-ironic`.
      runShardbridge(["run", "--id", "h", "--shard", ".hidden", "--token", "t", "--", "true"]),
    ]);
    expect(derived.status, derived.stderr).to.equal(2);
    expect(derived.stderr).to.include(`nova's [DEFAULT] host for shard .hidden would be ".hidden-ironic"`);
    expect(derived.stderr).to.match(/give --host/);
    expect(run.status, run.stderr).to.equal(2);
    expect(run.stderr).to.match(/shard: must not be dots only/);
    expect(agent.status, agent.stderr).to.equal(2);
    expect(agent.stderr).to.match(/U\+202E is not one of them/);
    expect(agent.stderr).to.match(/shard: must not be dots only/);
  });
});
