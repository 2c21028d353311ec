import { expect } from "chai";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { request, type IncomingMessage } from "node:http";
import { connect } from "node:net";
import { BridgeClient } from "../../src/agent/bridge-client.js";
import { parseFencedUrl } from "../../src/api/fenced/path.js";
import { fenceMarginMs } from "../../src/core/lease/bounds.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { createIronicNode, useIronicPeer } from "../helpers/ironic-peer.js";
import { grantWhenReady, type Grant } from "../helpers/leases.js";
import { RecordingProxy } from "../helpers/openstack/recording-proxy.js";
import { until } from "../helpers/until.js";

const TTL_MS = 3000;
const SHARD = "rack-f";
const OTHER = "rack-other";
const IRONIC = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };
/** The bridge's own credentials for Ironic, in --ironic: they must never ride on a caller's request. */
const BRIDGE_CREDENTIALS = "bridge-user:bridge-password-7f3a";
const FENCED_CONCURRENCY = 8;

describe("Fenced Ironic endpoint: only the live holder's writes reach the real Ironic", function () {
  this.timeout(400_000);
  const peer = useIronicPeer("fenced endpoint tests");
  let bridge: BridgeProcess;
  /** between the bridge and Ironic: what reached Ironic, as Ironic was asked */
  let proxy: RecordingProxy;
  let mine: string;
  let theirs: string;

  before(async () => {
    proxy = await RecordingProxy.start(peer.peer.endpoint);
    const upstream = new URL(proxy.url);
    bridge = await startBridge({
      shards: [
        { name: SHARD, lease_ttl_ms: TTL_MS },
        { name: OTHER, lease_ttl_ms: TTL_MS },
      ],
      agents: ["host-a", "host-b"],
      args: [
        "--ironic",
        `http://${BRIDGE_CREDENTIALS}@${upstream.host}`,
        "--fenced-concurrency",
        String(FENCED_CONCURRENCY),
      ],
    });
    mine = await createIronicNode(peer.peer.endpoint, { name: "fenced-mine", shard: SHARD });
    theirs = await createIronicNode(peer.peer.endpoint, { name: "fenced-theirs", shard: OTHER });
  });
  after(async () => {
    await bridge?.stop();
    await proxy?.stop();
  });

  const clientOf = (agent: string) => new BridgeClient(bridge.url, bridge.tokenOf(agent));
  /** Leases a test took: each handed back after it, whatever it asserted (the next test takes the shard). */
  const taken: Array<{ agent: string; shard: string; grant: Grant }> = [];
  const acquire = async (agent: string, shard = SHARD) => {
    const grant = await grantWhenReady(clientOf(agent), shard, agent);
    taken.push({ agent, shard, grant });
    return grant;
  };
  const release = (agent: string, { token }: Grant, shard = SHARD) =>
    clientOf(agent).release({ shard, agent, token });
  /** The lease renewed, as its holder would every TTL/3: for a test longer than the margin allows. */
  const renew = async (agent: string, { token }: Grant, shard = SHARD) =>
    expect((await clientOf(agent).renew({ shard, agent, token })).ok).to.equal(true);
  afterEach(async () => {
    for (const { agent, shard, grant } of taken.splice(0)) await release(agent, grant, shard);
  });
  const through = ({ token, fenceKey }: Grant, shard = SHARD) =>
    `${bridge.url}/fenced/${shard}/lease-${token}-${fenceKey}/ironic`;
  const mark = (base: string, node: string, value: string) =>
    fetch(`${base}/v1/nodes/${node}`, {
      method: "PATCH",
      headers: IRONIC,
      body: JSON.stringify([{ op: "add", path: "/extra/managed_by", value }]),
    });
  const markOf = async (node: string) => {
    const res = await fetch(`${peer.peer.endpoint}/v1/nodes/${node}?fields=extra`, { headers: IRONIC });
    return (await res.json()).extra?.managed_by ?? null;
  };
  const counted = async (outcome: string, shard = SHARD) => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    const line = new RegExp(
      `^shardbridge_fenced_requests_total\\{shard="${shard}",outcome="${outcome}"\\} (\\d+)`,
      "m",
    );
    return Number(line.exec(text)?.[1] ?? 0);
  };
  /** What reached Ironic from now on, as Ironic was asked: see `since`. */
  const writesSince = (from: number) =>
    proxy.requests.slice(from).filter((r) => !["GET", "HEAD", "OPTIONS"].includes(r.method));
  /** The bridge's log so far, as the lines it wrote. */
  const bridgeLog = () => JSON.stringify(bridge.serve.events);
  /** A raw request line, sent as written (fetch would resolve dot segments before sending). */
  const rawRequest = (method: string, path: string, body?: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL(bridge.url);
      const socket = connect(Number(url.port), url.hostname);
      let text = "";
      socket.on("data", (chunk) => (text += chunk.toString("utf8")));
      socket.on("end", () => {
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
        resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
      });
      socket.on("error", reject);
      const payload = body ?? "";
      socket.write(
        `${method} ${path} HTTP/1.1\r\nhost: ${url.host}\r\nconnection: close\r\n` +
          `x-openstack-ironic-api-version: 1.82\r\ncontent-type: application/json\r\n` +
          `content-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      );
    });
  const rssMb = () =>
    Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${bridge.serve.child.pid}/status`, "utf8"))![1]) /
    1024;

  it("the margin a write must find left is what a holder within its deadline always has: TTL/3", () => {
    expect(fenceMarginMs(6000)).to.equal(2000);
    expect(fenceMarginMs(3000)).to.equal(1000);
    expect(fenceMarginMs(1000)).to.equal(334);
  });

  it("tells a supervisor where its child's Ironic client must point", async () => {
    const res = await fetch(`${bridge.url}/v1/shards/${SHARD}`, {
      headers: { authorization: `Bearer ${bridge.tokenOf("host-a")}` },
    });
    expect((await res.json()).ironic_endpoint).to.equal(`/fenced/${SHARD}/lease-{token}-{fence_key}/ironic`);
  });

  it("passes reads and the holder's writes, and keeps the client on the proxy (links rewritten)", async () => {
    const grant = await acquire("host-a");
    const read = await fetch(`${through(grant)}/v1/nodes/${mine}`, { headers: IRONIC });
    expect(read.status).to.equal(200);
    const text = await read.text();
    expect(text).to.include(
      `/fenced/${SHARD}/lease-${grant.token}-${grant.fenceKey}/ironic/v1/nodes/${mine}`,
    );
    expect(text).to.not.include(proxy.url);
    const root = await (await fetch(`${through(grant)}/`, { headers: IRONIC })).text();
    expect(root, "version discovery points at the proxy").to.include(
      `/fenced/${SHARD}/lease-${grant.token}-${grant.fenceKey}/ironic`,
    );
    expect(root).to.not.include(proxy.url);

    expect((await mark(through(grant), mine, `a:${grant.token}`)).status).to.equal(200);
    expect(await markOf(mine)).to.equal(`a:${grant.token}`);
    // By name, the write went to Ironic by the node's uuid: the node the fence read.
    await renew("host-a", grant);
    const from = proxy.requests.length;
    expect((await mark(through(grant), "fenced-mine", `a-by-name:${grant.token}`)).status).to.equal(200);
    expect(writesSince(from).map((r) => r.path)).to.deep.equal([`/v1/nodes/${mine}`]);
    await release("host-a", grant);
  });

  it("refuses, without reaching Ironic, a stale lease, a wrong key and a write to another shard's node", async () => {
    const old = await acquire("host-a");
    expect((await mark(through(old), mine, `a:${old.token}`)).status).to.equal(200);
    await release("host-a", old);
    const current = await acquire("host-b");
    const refusedBefore = await counted("refused");
    const from = proxy.requests.length;

    const stale = await mark(through(old), mine, `a-stale:${old.token}`);
    expect(stale.status).to.equal(409);
    expect((await stale.json()).errors[0]).to.include({ code: "shardbridge.lease.fenced" });
    const wrongKey = await mark(through({ token: current.token, fenceKey: old.fenceKey }), mine, "wrong-key");
    expect(wrongKey.status).to.equal(409);
    // Reads too: the endpoint serves the live lease only.
    expect((await fetch(`${through(old)}/v1/nodes/${mine}`, { headers: IRONIC })).status).to.equal(409);
    expect(await markOf(mine), "the stale write never reached Ironic").to.equal(`a:${old.token}`);

    const other = await mark(through(current), theirs, `b:${current.token}`);
    expect(other.status).to.equal(409);
    expect((await other.json()).errors[0].detail).to.match(/is in shard rack-other, not rack-f/);
    expect(await markOf(theirs)).to.equal(null);

    // By name too: Ironic resolves it, the fence reads its shard.
    expect((await mark(through(current), "fenced-theirs", `b:${current.token}`)).status).to.equal(409);
    expect(writesSince(from), "no refused write reached Ironic").to.deep.equal([]);
    expect((await mark(through(current), "fenced-mine", `b:${current.token}`)).status).to.equal(200);
    expect(await markOf(mine)).to.equal(`b:${current.token}`);
    expect(await counted("refused"), "each refusal counted, a defined shard's under its name").to.equal(
      refusedBefore + 5,
    );
    await release("host-b", current);
  });

  it("a node's ports are the node's: created, changed, moved or deleted only under the lease of the node's shard", async () => {
    const grant = await acquire("host-a");
    const call = (base: string, method: string, path: string, body?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: IRONIC,
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    const portsOf = async (node: string) =>
      (await (await call(peer.peer.endpoint, "GET", `/v1/ports?node_uuid=${node}`)).json()).ports as Array<{
        uuid: string;
      }>;

    const own = await call(through(grant), "POST", "/v1/ports", {
      node_uuid: mine,
      address: "52:54:00:fe:00:01",
    });
    expect(own.status, await own.clone().text()).to.equal(201);
    const ownPort = (await own.json()).uuid as string;
    const renamed = [{ op: "add", path: "/extra/by", value: String(grant.token) }];
    expect((await call(through(grant), "PATCH", `/v1/ports/${ownPort}`, renamed)).status).to.equal(200);

    await renew("host-a", grant);
    const from = proxy.requests.length;
    // Another shard's node: its new port, and a port it has, are out of reach.
    const foreign = await call(through(grant), "POST", "/v1/ports", {
      node_uuid: theirs,
      address: "52:54:00:fe:00:02",
    });
    expect(foreign.status).to.equal(409);
    expect((await foreign.json()).errors[0].detail).to.match(/is in shard rack-other, not rack-f/);
    expect(await portsOf(theirs), "no port made for the other shard's node").to.deep.equal([]);
    const direct = await call(peer.peer.endpoint, "POST", "/v1/ports", {
      node_uuid: theirs,
      address: "52:54:00:fe:00:03",
    });
    const theirPort = (await direct.json()).uuid as string;
    expect((await call(through(grant), "PATCH", `/v1/ports/${theirPort}`, renamed)).status).to.equal(409);
    expect((await call(through(grant), "DELETE", `/v1/ports/${theirPort}`)).status).to.equal(409);
    await renew("host-a", grant);
    // The shard's own port, moved onto the other shard's node: a write to that node.
    const moved = [{ op: "replace", path: "/node_uuid", value: theirs }];
    expect((await call(through(grant), "PATCH", `/v1/ports/${ownPort}`, moved)).status).to.equal(409);
    // The shard's own node, moved to another shard.
    const reshard = [{ op: "replace", path: "/shard", value: OTHER }];
    expect((await call(through(grant), "PATCH", `/v1/nodes/${mine}`, reshard)).status).to.equal(409);
    expect((await portsOf(theirs)).map((p) => p.uuid)).to.deep.equal([theirPort]);
    // A new port that names no node, and a write about no node at all (a chassis).
    expect(
      (await call(through(grant), "POST", "/v1/ports", { address: "52:54:00:fe:00:04" })).status,
    ).to.equal(409);
    const chassis = await call(through(grant), "POST", "/v1/chassis", { description: "not a shard's" });
    expect(chassis.status).to.equal(409);
    expect((await (await call(peer.peer.endpoint, "GET", "/v1/chassis")).json()).chassis).to.deep.equal([]);
    expect(writesSince(from), "no refused write reached Ironic").to.deep.equal([]);

    await renew("host-a", grant);
    expect((await call(through(grant), "DELETE", `/v1/ports/${ownPort}`)).status).to.equal(204);
    await call(peer.peer.endpoint, "DELETE", `/v1/ports/${theirPort}`);
    await release("host-a", grant);
  });

  it("judges a write's body as Ironic will read it: a patch the fence cannot read is refused, the one it read is what Ironic gets", async () => {
    const grant = await acquire("host-a");
    const from = proxy.requests.length;
    const patch = (path: string, body: string) =>
      rawRequest("PATCH", `${new URL(through(grant)).pathname}${path}`, body);
    // Python's json takes NaN (Ironic's patch would pass), JSON.parse does not: refused, not let through.
    const sneaked =
      '[{"op":"replace","path":"/shard","value":"rack-other"},{"op":"add","path":"/extra/n","value":NaN}]';
    for (const body of [
      sneaked,
      '{"op":"replace","path":"/shard","value":"x"}',
      '[{"path":"/shard"}]',
      "[1]",
    ]) {
      const answer = await patch(`/v1/nodes/${mine}`, body);
      expect(answer.status, body).to.equal(409);
      expect(JSON.parse(answer.body).errors[0].code, body).to.equal("shardbridge.lease.fenced");
    }
    // A whole-document operation touches the shard too.
    expect((await patch(`/v1/nodes/${mine}`, '[{"op":"replace","path":"","value":{}}]')).status).to.equal(
      409,
    );
    expect(writesSince(from), "none reached Ironic").to.deep.equal([]);
    // The patch it read, written again, is what Ironic receives.
    const spaced = ' [ { "op" : "add", "path" : "/extra/judged", "value" : 1.50 } ] ';
    expect((await patch(`/v1/nodes/${mine}`, spaced)).status).to.equal(200);
    expect(writesSince(from).map((r) => r.body)).to.deep.equal([
      JSON.stringify([{ op: "add", path: "/extra/judged", value: 1.5 }]),
    ]);
    // A portgroup named, not by its uuid: forwarded by the uuid the check read.
    const made = await fetch(`${peer.peer.endpoint}/v1/portgroups`, {
      method: "POST",
      headers: IRONIC,
      body: JSON.stringify({ node_uuid: mine, name: "pg-fenced", address: "52:54:00:fe:00:10" }),
    });
    const group = (await made.json()).uuid as string;
    const at = proxy.requests.length;
    expect(
      (await patch("/v1/portgroups/pg-fenced", '[{"op":"add","path":"/extra/by","value":"x"}]')).status,
    ).to.equal(200);
    expect(writesSince(at).map((r) => r.path)).to.deep.equal([`/v1/portgroups/${group}`]);
    await fetch(`${peer.peer.endpoint}/v1/portgroups/${group}`, { method: "DELETE", headers: IRONIC });
  });

  it("keeps the caller's cookie and encoding, and Ironic's cookies, on their own side", async () => {
    const grant = await acquire("host-a");
    const from = proxy.requests.length;
    // node:http, not fetch: fetch will not send a Connection header of the caller's choosing.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) =>
      request(
        `${through(grant)}/v1/nodes/${mine}`,
        {
          headers: {
            ...IRONIC,
            cookie: "shardbridge_page=secret",
            "accept-encoding": "gzip",
            connection: "x-private",
            "x-private": "1",
          },
        },
        (res) => {
          let body = "";
          res.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
          res.on("end", () => resolve({ status: res.statusCode!, body }));
        },
      )
        .on("error", reject)
        .end(),
    );
    expect(answer.status).to.equal(200);
    const asked = proxy.requests.slice(from);
    expect(asked).to.have.length(1);
    expect(asked[0]!.headers).to.not.have.any.keys("cookie", "accept-encoding", "x-private");
    expect(JSON.parse(answer.body)).to.include({ uuid: mine });
  });

  it("cannot be steered: a path that reads as another node, another resource or another server is refused", async () => {
    const grant = await acquire("host-a");
    const before = await markOf(theirs);
    // Somewhere the bridge's host can reach that is not the configured Ironic.
    const elsewhere = await RecordingProxy.start(peer.peer.endpoint);
    const base = `/fenced/${SHARD}/lease-${grant.token}-${grant.fenceKey}/ironic`;
    const patch = JSON.stringify([{ op: "add", path: "/extra/managed_by", value: "steered" }]);
    const from = proxy.requests.length;
    for (const steer of [
      `/v1/nodes/${mine}/../${theirs}`,
      `/v1/nodes/${mine}/%2e%2e/${theirs}`,
      `/v1/nodes/${mine}%2f..%2f${theirs}`,
      `/v1/nodes/${mine}/..%2f..%2fchassis`,
      `/v1/nodes/${mine}\\..\\${theirs}`,
      `/v1/nodes/${mine}%5c..%5c${theirs}`,
      `//${new URL(elsewhere.url).host}/v1/nodes/${theirs}`,
      `/v1//nodes/${theirs}`,
    ]) {
      const answer = await rawRequest("PATCH", `${base}${steer}`, patch);
      expect(answer.status, steer).to.equal(400);
      expect(JSON.parse(answer.body).errors[0].code, steer).to.equal("shardbridge.fenced.bad_path");
    }
    // Without any lease: nothing is asked of anyone, reads included.
    for (const path of [
      `/fenced/${SHARD}/lease-1-${"0".repeat(32)}/ironic//${new URL(elsewhere.url).host}/`,
      `/fenced/${SHARD}/lease-1-${"0".repeat(32)}/ironic@${new URL(elsewhere.url).host}/v1`,
      `/fenced/${SHARD}/lease-1-${"0".repeat(32)}/ironic/v1/nodes`,
    ])
      for (const method of ["GET", "HEAD", "OPTIONS"])
        expect((await rawRequest(method, path)).status, `${method} ${path}`).to.be.oneOf([400, 404, 409]);
    expect(elsewhere.requests, "nothing reached another server").to.deep.equal([]);
    expect(writesSince(from), "no steered write reached Ironic").to.deep.equal([]);
    expect(await markOf(theirs)).to.equal(before);
    await elsewhere.stop();
    await release("host-a", grant);
  });

  it("forwards only what it checked: any write Ironic receives names one node of the holder's shard, by the path the fence read", async () => {
    const grant = await acquire("host-a");
    const base = `/fenced/${SHARD}/lease-${grant.token}-${grant.fenceKey}/ironic`;
    const piece = fc.constantFrom(
      "v1",
      "nodes",
      mine,
      theirs,
      "fenced-mine",
      "fenced-theirs",
      "extra",
      "..",
      ".",
      "%2e%2e",
      "%2f",
      "%5c",
      "",
      "ports",
      "chassis",
      "traits",
      "CUSTOM_X",
    );
    const path = fc
      .array(fc.array(piece, { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 5 })
      .map((segments) => `/${segments.map((parts) => parts.join("")).join("/")}`);
    const sent: Array<{ method: string; path: string; checked: string | null }> = [];
    await fc.assert(
      fc.asyncProperty(path, fc.constantFrom("PUT", "PATCH", "DELETE"), async (p, method) => {
        const parsed = parseFencedUrl(`${base}${p}`);
        // Not the node itself: the runs go on with it.
        if (method === "DELETE" && parsed.ok && parsed.target.segments.length === 3) return;
        const from = proxy.requests.length;
        await rawRequest(method, `${base}${p}`, method === "PATCH" ? "[]" : "");
        for (const write of writesSince(from)) {
          // Ironic received a write: it is about the holder's node, by its uuid, on the path read.
          expect(write.path, p).to.match(new RegExp(`^/v1/nodes/${mine}(/|$)`));
          expect(parsed.ok && parsed.target.path.replace("fenced-mine", mine), p).to.equal(write.path);
        }
        sent.push({ method, path: p, checked: parsed.ok ? parsed.target.path : null });
      }),
      { numRuns: 150, seed: 20261206 },
    );
    expect(sent.filter((s) => s.checked === null).length, "the runs included refused paths").to.be.above(10);
    expect(await markOf(theirs)).to.equal(null);
    await release("host-a", grant);
  });

  it("never adds the bridge's own credentials to a caller's request, nor logs them or a fence key", async () => {
    const grant = await acquire("host-a");
    const from = proxy.requests.length;
    expect((await fetch(`${through(grant)}/v1/nodes/${mine}`, { headers: IRONIC })).status).to.equal(200);
    expect((await mark(through(grant), mine, "no-credentials")).status).to.equal(200);
    const asked = proxy.requests.slice(from);
    expect(asked.length).to.be.at.least(3);
    expect(
      asked.map((r) => r.authorization),
      "no Authorization the caller did not send",
    ).to.deep.equal(asked.map(() => null));
    const own = "Basic " + Buffer.from("nova:nova-secret").toString("base64");
    const mark2 = await fetch(`${through(grant)}/v1/nodes/${mine}`, {
      headers: { ...IRONIC, authorization: own },
    });
    expect(mark2.status).to.equal(200);
    expect(proxy.requests.at(-1)!.authorization, "the caller's own, as it sent it").to.equal(own);
    const log = bridgeLog();
    expect(log).to.include("bridge-user");
    expect(log, "the password of --ironic is masked").to.not.include("bridge-password-7f3a");
    expect(log, "no fence key in the log").to.not.include(grant.fenceKey);
    await release("host-a", grant);
  });

  it("reads no body and asks Ironic nothing for a caller without the live lease: 40 callers declaring 8 MiB each", async () => {
    const grant = await acquire("host-a");
    const rssBefore = rssMb();
    const from = proxy.requests.length;
    const answers = await Promise.all(
      Array.from(
        { length: 40 },
        (_, i) =>
          new Promise<number>((resolve, reject) => {
            const sent = request(
              `${bridge.url}/fenced/${SHARD}/lease-${grant.token}-${i.toString(16).padStart(32, "0")}/ironic/v1/nodes/${mine}`,
              { method: "PATCH", headers: { ...IRONIC, "content-length": String(8 * 1024 * 1024 - 1) } },
            );
            sent.on("response", (res) => {
              res.resume();
              resolve(res.statusCode!);
            });
            sent.on("error", reject);
            // A megabyte of it, then nothing more: the answer must not wait for the rest.
            sent.write(Buffer.alloc(1024 * 1024, 0x20));
          }),
      ),
    );
    expect(answers).to.deep.equal(answers.map(() => 409));
    expect(proxy.requests.length - from, "Ironic was asked nothing").to.equal(0);
    expect(rssMb() - rssBefore, "MB the bridge grew by").to.be.below(64);
    await release("host-a", grant);
  });

  it("answers every wrong guess of a live lease's credential alike, and none passes", async () => {
    const grant = await acquire("host-a");
    const other = await acquire("host-b", OTHER);
    const from = proxy.requests.length;
    const answers = new Set<string>();
    const guesses: string[] = [];
    for (let i = 0; i < 300; i++) {
      const key = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex");
      // The right token with a guessed key; a near token with the right key; another shard's live lease.
      guesses.push(`lease-${grant.token}-${key}`, `lease-${grant.token + 1 + (i % 5)}-${grant.fenceKey}`);
    }
    guesses.push(`lease-${other.token}-${other.fenceKey}`);
    for (const guess of guesses) {
      const answer = await rawRequest("PATCH", `/fenced/${SHARD}/${guess}/ironic/v1/nodes/${mine}`, "[]");
      answers.add(`${answer.status} ${answer.body}`);
    }
    expect([...answers], "one answer for every wrong credential").to.have.length(1);
    expect([...answers][0]).to.match(/^409 /);
    expect(writesSince(from)).to.deep.equal([]);
    await release("host-a", grant);
    await release("host-b", other, OTHER);
  });

  it("streams an answer that never ends at the caller's pace, and drops it when the caller leaves", async () => {
    const grant = await acquire("host-a");
    proxy.endless = new Set(["GET"]);
    const abandonedBefore = proxy.abandoned;
    const rssBefore = rssMb();
    try {
      const res = await new Promise<IncomingMessage>((resolve, reject) =>
        request(`${through(grant)}/v1/nodes/${mine}`, { headers: IRONIC }, resolve)
          .on("error", reject)
          .end(),
      );
      expect(res.statusCode).to.equal(200);
      // Read a little, then stop reading: the bridge must not keep what Ironic keeps sending.
      await new Promise((r) => res.once("data", r));
      res.pause();
      await new Promise((r) => setTimeout(r, 3000));
      expect(rssMb() - rssBefore, "MB the bridge grew by while the caller did not read").to.be.below(64);
      res.destroy();
      await until(
        "the bridge hung up on Ironic",
        async () => proxy.abandoned,
        (n) => n > abandonedBefore,
        5000,
      );
    } finally {
      proxy.endless = new Set();
    }
    await release("host-a", grant);
  });

  it("ends a write that Ironic never finishes answering when its lease would end, and says so in the log without its key", async () => {
    const grant = await acquire("host-a");
    proxy.endless = new Set(["PATCH"]);
    const logged = bridge.serve.events.length;
    const started = performance.now();
    try {
      // A patch: Ironic answers it with the node (a trait's PUT answers 204, no body to draw out).
      const res = await mark(through(grant), mine, "endless");
      await res.arrayBuffer().catch(() => undefined);
    } catch {
      // the bridge cut the answer short: what it must do
    } finally {
      proxy.endless = new Set();
    }
    // Bounded by the claim: no longer than the lease had left (under the TTL), plus a margin.
    expect(performance.now() - started, "ms the write was kept open").to.be.below(TTL_MS + 2000);
    const slow = await bridge.serve.waitFor(
      (e) => e.ev === "slow request" && String(e.path).includes("/fenced/"),
      5000,
      logged,
    );
    expect(slow.path).to.equal(`/fenced/${SHARD}/lease-${grant.token}-***/ironic/v1/nodes/${mine}`);
    expect(JSON.stringify(slow)).to.not.include(grant.fenceKey);
    await release("host-a", grant);
  });

  it("takes at most --fenced-concurrency requests at once (503 beyond), and serves again once they end", async () => {
    const grant = await acquire("host-a");
    proxy.endless = new Set(["GET"]);
    const open: IncomingMessage[] = [];
    try {
      for (let i = 0; i < FENCED_CONCURRENCY; i++)
        open.push(
          await new Promise<IncomingMessage>((resolve, reject) =>
            request(`${through(grant)}/v1/nodes/${mine}`, { headers: IRONIC }, resolve)
              .on("error", reject)
              .end(),
          ),
        );
      // A caller without the lease is refused at the lease, taking no place: it cannot crowd holders out.
      const guess = await fetch(
        `${through({ token: grant.token, fenceKey: "0".repeat(32) })}/v1/nodes/${mine}`,
        {
          headers: IRONIC,
        },
      );
      expect(guess.status).to.equal(409);
      const over = await fetch(`${through(grant)}/v1/nodes/${mine}`, { headers: IRONIC });
      expect(over.status).to.equal(503);
      expect((await over.json()).errors[0].code).to.equal("shardbridge.fenced.busy");
      expect(over.headers.get("retry-after")).to.equal("1");
    } finally {
      for (const res of open) res.destroy();
      proxy.endless = new Set();
    }
    await until(
      "served again",
      async () => (await fetch(`${through(grant)}/v1/nodes/${mine}`, { headers: IRONIC })).status,
      (status) => status === 200,
      5000,
    );
    await release("host-a", grant);
  });

  it("cuts a holder's write whose body trickles in at the write's deadline (its lease), freeing its place", async () => {
    const grant = await acquire("host-a");
    const started = performance.now();
    const status = await new Promise<number | "closed">((resolve) => {
      const sent = request(`${through(grant)}/v1/nodes/${mine}`, {
        method: "PATCH",
        headers: { ...IRONIC, "content-length": "100" },
      });
      sent.on("response", (res) => resolve(res.statusCode!));
      sent.on("error", () => resolve("closed"));
      sent.write('[{"op":"add",'); // and nothing more
    });
    expect(status).to.be.oneOf([504, "closed"]);
    // Bounded by the claim: the lease had at most its TTL left.
    expect(performance.now() - started, "ms the trickling write was held").to.be.below(TTL_MS + 2000);
  });

  it("rewrites links to the scheme the client used: https behind a balancer that says so", async () => {
    const grant = await acquire("host-a");
    const res = await fetch(`${through(grant)}/v1/nodes/${mine}`, {
      headers: { ...IRONIC, "x-forwarded-proto": "https" },
    });
    const text = await res.text();
    expect(text).to.include(
      `https://${new URL(bridge.url).host}/fenced/${SHARD}/lease-${grant.token}-${grant.fenceKey}/ironic/v1/nodes/${mine}`,
    );
    expect(text).to.not.include(`http://${new URL(bridge.url).host}/fenced/`);
    await release("host-a", grant);
  });

  it("refuses bad input before anything reaches Ironic: a body over the limit, a path that does not decode", async () => {
    const grant = await acquire("host-a");
    const before = await markOf(mine);
    // A declared 9 MiB: refused on the header, before the body is read.
    const status = await new Promise<number>((resolve, reject) => {
      const sent = request(`${through(grant)}/v1/nodes/${mine}`, {
        method: "PATCH",
        headers: { ...IRONIC, "content-length": String(9 * 1024 * 1024) },
      });
      sent.on("response", (res) => resolve(res.statusCode!));
      sent.on("error", reject);
      sent.write("[");
    });
    expect(status).to.equal(413);
    const patch = JSON.stringify([{ op: "add", path: "/extra/managed_by", value: "bad-path" }]);
    const badShard = await rawRequest(
      "PATCH",
      `/fenced/%E0%A4%A/lease-${grant.token}-${grant.fenceKey}/ironic/v1/nodes/${mine}`,
      patch,
    );
    expect(badShard.status).to.equal(400);
    expect(JSON.parse(badShard.body).errors[0].field).to.equal("shard");
    const badNode = await rawRequest("PATCH", `${new URL(through(grant)).pathname}/v1/nodes/%E0%A4%A`, patch);
    expect(badNode.status).to.equal(400);
    expect(JSON.parse(badNode.body).errors[0].field, "the node's segment, not the shard").to.equal(
      "ironic_path",
    );
    expect(await markOf(mine), "nothing reached Ironic").to.equal(before);
    await release("host-a", grant);
  });

  it("refuses the holder's own write once the lease has less left than a holder within its deadline has, and nobody renews it", async () => {
    const grant = await acquire("host-a");
    // Not renewed: past 2/3 of the TTL the holder should have stopped acting.
    await new Promise((r) => setTimeout(r, TTL_MS - fenceMarginMs(TTL_MS) + 100));
    const late = await mark(through(grant), mine, `late:${grant.token}`);
    expect(late.status).to.equal(409);
    expect((await late.json()).errors[0].detail).to.match(
      /was not renewed before it ended: the writer is past its own deadline/,
    );
    expect(await markOf(mine)).to.not.equal(`late:${grant.token}`);
  });

  it("lets the holder's write through once its late renew lands, with the lease's margin restored", async () => {
    // The window is the lease's last TTL/3 (1 s): a machine too busy to send the renew
    // inside it ends the lease, and the case starts again on a new one.
    for (let attempt = 1; ; attempt++) {
      const grant = await acquire("host-a");
      await new Promise((r) => setTimeout(r, TTL_MS - fenceMarginMs(TTL_MS) + 100));
      const write = mark(through(grant), mine, `renewed-late:${grant.token}`);
      await new Promise((r) => setTimeout(r, 200));
      const renewed = await clientOf("host-a").renew({ shard: SHARD, agent: "host-a", token: grant.token });
      const answer = await write;
      if (!renewed.ok) {
        expect(attempt, "renews that came after the lease's end").to.be.below(4);
        continue;
      }
      expect(answer.status, await answer.text()).to.equal(200);
      expect(await markOf(mine)).to.equal(`renewed-late:${grant.token}`);
      // Said of this write alone: every write before it in this file found its margin.
      const waited = bridge.serve.events.filter((e) => e.ev === "fenced-write-waited");
      expect(
        waited.map((e) => e.token),
        "the bridge's word that the write waited",
      ).to.deep.equal([grant.token]);
      expect(JSON.stringify(waited), "no fence key in the log").to.not.include(grant.fenceKey);
      return;
    }
  });
});
