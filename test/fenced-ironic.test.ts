import { expect } from "chai";
import { request } from "node:http";
import { BridgeClient } from "../src/agent/bridge-client.js";
import { fenceMarginMs } from "../src/api/routes/fenced-ironic.js";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { createIronicNode, useIronicPeer } from "./helpers/ironic-peer.js";
import { acquireWhenReady } from "./helpers/leases.js";

const TTL_MS = 3000;
const SHARD = "rack-f";
const IRONIC = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };

describe("Fenced Ironic endpoint: only the live holder's writes reach the real Ironic", function () {
  this.timeout(400_000);
  const peer = useIronicPeer("fenced endpoint tests");
  let bridge: BridgeProcess;
  let mine: string;
  let theirs: string;

  before(async () => {
    bridge = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
      agents: ["host-a", "host-b"],
      args: ["--ironic", peer.peer.endpoint],
    });
    mine = await createIronicNode(peer.peer.endpoint, { name: "fenced-mine", shard: SHARD });
    theirs = await createIronicNode(peer.peer.endpoint, { name: "fenced-theirs", shard: "rack-other" });
  });
  after(async () => bridge?.stop());

  const clientOf = (agent: string) => new BridgeClient(bridge.url, bridge.tokenOf(agent));
  const acquire = (agent: string) => acquireWhenReady(clientOf(agent), SHARD, agent);
  const release = (agent: string, token: number) => clientOf(agent).release({ shard: SHARD, agent, token });
  const through = (token: number) => `${bridge.url}/fenced/${SHARD}/lease-${token}/ironic`;
  const mark = (base: string, node: string, value: string) =>
    fetch(`${base}/v1/nodes/${node}`, {
      method: "PATCH",
      headers: IRONIC,
      body: JSON.stringify([{ op: "add", path: "/extra/managed_by", value }]),
    });
  const markOf = async (node: string) => {
    const res = await fetch(`${peer.peer.endpoint}/v1/nodes/${node}?fields=extra`, { headers: IRONIC });
    return ((await res.json()) as any).extra?.managed_by ?? null;
  };
  const counted = async (outcome: string) => {
    const text = await (await fetch(`${bridge.url}/metrics`)).text();
    const line = new RegExp(
      `^shardbridge_fenced_requests_total\\{shard="${SHARD}",outcome="${outcome}"\\} (\\d+)`,
      "m",
    );
    return Number(line.exec(text)?.[1] ?? 0);
  };

  it("the margin a write must find left is what a holder within its deadline always has: TTL/3", () => {
    expect(fenceMarginMs(6000)).to.equal(2000);
    expect(fenceMarginMs(3000)).to.equal(1000);
    expect(fenceMarginMs(1000)).to.equal(334);
  });

  it("tells a supervisor where its child's Ironic client must point", async () => {
    const res = await fetch(`${bridge.url}/v1/shards/${SHARD}`, {
      headers: { authorization: `Bearer ${bridge.tokenOf("host-a")}` },
    });
    expect(((await res.json()) as any).ironic_endpoint).to.equal(`/fenced/${SHARD}/lease-{token}/ironic`);
  });

  it("passes reads and the holder's writes, and keeps the client on the proxy (links rewritten)", async () => {
    const token = await acquire("host-a");
    const read = await fetch(`${through(token)}/v1/nodes/${mine}`, { headers: IRONIC });
    expect(read.status).to.equal(200);
    const text = await read.text();
    expect(text).to.include(`/fenced/${SHARD}/lease-${token}/ironic/v1/nodes/${mine}`);
    expect(text).to.not.include(peer.peer.endpoint);
    const root = await (await fetch(`${through(token)}/`, { headers: IRONIC })).text();
    expect(root, "version discovery points at the proxy").to.include(
      `/fenced/${SHARD}/lease-${token}/ironic`,
    );
    expect(root).to.not.include(peer.peer.endpoint);

    expect((await mark(through(token), mine, `a:${token}`)).status).to.equal(200);
    expect(await markOf(mine)).to.equal(`a:${token}`);
    await release("host-a", token);
  });

  it("refuses, without reaching Ironic, a write under a stale token and a write to another shard's node", async () => {
    const old = await acquire("host-a");
    expect((await mark(through(old), mine, `a:${old}`)).status).to.equal(200);
    await release("host-a", old);
    const current = await acquire("host-b");
    const refusedBefore = await counted("refused");

    const stale = await mark(through(old), mine, `a-stale:${old}`);
    expect(stale.status).to.equal(409);
    expect(((await stale.json()) as any).errors[0]).to.include({ code: "shardbridge.lease.fenced" });
    expect(await markOf(mine), "the stale write never reached Ironic").to.equal(`a:${old}`);

    const other = await mark(through(current), theirs, `b:${current}`);
    expect(other.status).to.equal(409);
    expect(((await other.json()) as any).errors[0].detail).to.match(/is in shard rack-other, not rack-f/);
    expect(await markOf(theirs)).to.equal(null);

    // By name too: Ironic resolves it, the fence reads its shard.
    expect((await mark(through(current), "fenced-theirs", `b:${current}`)).status).to.equal(409);
    expect((await mark(through(current), "fenced-mine", `b:${current}`)).status).to.equal(200);
    expect(await markOf(mine)).to.equal(`b:${current}`);
    expect(await counted("refused")).to.equal(refusedBefore + 3);
    // Reads pass under any token: they change nothing.
    expect((await fetch(`${through(old)}/v1/nodes/${mine}`, { headers: IRONIC })).status).to.equal(200);
    await release("host-b", current);
  });

  it("a node's ports are the node's: created, changed or deleted only under the lease of the node's shard", async () => {
    const token = await acquire("host-a");
    const call = (base: string, method: string, path: string, body?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: IRONIC,
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    const portsOf = async (node: string) =>
      ((await (await call(peer.peer.endpoint, "GET", `/v1/ports?node_uuid=${node}`)).json()) as any)
        .ports as Array<{
        uuid: string;
      }>;
    const refusedBefore = await counted("refused");

    const own = await call(through(token), "POST", "/v1/ports", {
      node_uuid: mine,
      address: "52:54:00:fe:00:01",
    });
    expect(own.status, await own.clone().text()).to.equal(201);
    const ownPort = ((await own.json()) as any).uuid as string;
    const renamed = [{ op: "add", path: "/extra/by", value: String(token) }];
    expect((await call(through(token), "PATCH", `/v1/ports/${ownPort}`, renamed)).status).to.equal(200);

    // Another shard's node: its new port, and a port it has, are out of reach.
    const foreign = await call(through(token), "POST", "/v1/ports", {
      node_uuid: theirs,
      address: "52:54:00:fe:00:02",
    });
    expect(foreign.status).to.equal(409);
    expect(((await foreign.json()) as any).errors[0].detail).to.match(/is in shard rack-other, not rack-f/);
    expect(await portsOf(theirs), "no port made for the other shard's node").to.deep.equal([]);
    const direct = await call(peer.peer.endpoint, "POST", "/v1/ports", {
      node_uuid: theirs,
      address: "52:54:00:fe:00:03",
    });
    const theirPort = ((await direct.json()) as any).uuid as string;
    expect((await call(through(token), "PATCH", `/v1/ports/${theirPort}`, renamed)).status).to.equal(409);
    expect((await call(through(token), "DELETE", `/v1/ports/${theirPort}`)).status).to.equal(409);
    expect((await portsOf(theirs)).map((p) => p.uuid)).to.deep.equal([theirPort]);
    // A new port that names no node, and a write about no node at all (a chassis).
    expect(
      (await call(through(token), "POST", "/v1/ports", { address: "52:54:00:fe:00:04" })).status,
    ).to.equal(409);
    const chassis = await call(through(token), "POST", "/v1/chassis", { description: "not a shard's" });
    expect(chassis.status).to.equal(409);
    expect(
      ((await (await call(peer.peer.endpoint, "GET", "/v1/chassis")).json()) as any).chassis,
    ).to.deep.equal([]);
    expect(await counted("refused")).to.equal(refusedBefore + 5);

    expect((await call(through(token), "DELETE", `/v1/ports/${ownPort}`)).status).to.equal(204);
    await call(peer.peer.endpoint, "DELETE", `/v1/ports/${theirPort}`);
    await release("host-a", token);
  });

  it("rewrites links to the scheme the client used: https behind a balancer that says so", async () => {
    const res = await fetch(`${through(1)}/v1/nodes/${mine}`, {
      headers: { ...IRONIC, "x-forwarded-proto": "https" },
    });
    const text = await res.text();
    expect(text).to.include(
      `https://${new URL(bridge.url).host}/fenced/${SHARD}/lease-1/ironic/v1/nodes/${mine}`,
    );
    expect(text).to.not.include(`http://${new URL(bridge.url).host}/fenced/`);
  });

  it("refuses bad input before anything reaches Ironic: a body over the limit, a path that does not decode", async () => {
    const token = await acquire("host-a");
    const before = await markOf(mine);
    // A declared 9 MiB: refused on the header, before the body is read.
    const status = await new Promise<number>((resolve, reject) => {
      const sent = request(`${through(token)}/v1/nodes/${mine}`, {
        method: "PATCH",
        headers: { ...IRONIC, "content-length": String(9 * 1024 * 1024) },
      });
      sent.on("response", (res) => resolve(res.statusCode!));
      sent.on("error", reject);
      sent.write("[");
    });
    expect(status).to.equal(413);
    const badPath = await fetch(`${bridge.url}/fenced/%E0%A4%A/lease-${token}/ironic/v1/nodes/${mine}`, {
      method: "PATCH",
      headers: IRONIC,
      body: JSON.stringify([{ op: "add", path: "/extra/managed_by", value: "bad-path" }]),
    });
    expect(badPath.status).to.equal(400);
    expect(((await badPath.json()) as any).errors[0].field).to.equal("shard");
    expect(await markOf(mine), "nothing reached Ironic").to.equal(before);
    await release("host-a", token);
  });

  it("refuses the holder's own write once the lease has less left than a holder within its deadline has", async () => {
    const token = await acquire("host-a");
    // Not renewed: past 2/3 of the TTL the holder should have stopped acting.
    await new Promise((r) => setTimeout(r, TTL_MS - fenceMarginMs(TTL_MS) + 100));
    const late = await mark(through(token), mine, `late:${token}`);
    expect(late.status).to.equal(409);
    expect(((await late.json()) as any).errors[0].detail).to.match(/past its own deadline/);
    expect(await markOf(mine)).to.not.equal(`late:${token}`);
  });
});
