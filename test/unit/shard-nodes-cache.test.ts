import { expect } from "chai";
import { ShardNodesCache } from "../../src/store/shard-nodes-cache.js";
import { nodeJson } from "../../src/store/node-json.js";
import type { BareMetalNode } from "../../src/core/node.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { NodeRegistry } from "../../src/store/node-registry.js";
import type { NodeSource } from "../../src/store/ports/nodes.js";
import { uuid } from "../helpers/http.js";

/**
 * The real registry over the embedded backend, counting the listings it was asked for; a
 * listing can be held after it read its nodes and before it hands them over (hold()).
 */
class CountingRegistry extends NodeRegistry {
  reads = 0;
  private gate: Promise<void> = Promise.resolve();

  /** Listings started from now on wait, their nodes read, until the function returned is called. */
  hold(): () => void {
    let release!: () => void;
    this.gate = new Promise((resolve) => (release = resolve));
    return release;
  }

  override async *pages(source: NodeSource, pageSize?: number): AsyncGenerator<BareMetalNode[]> {
    this.reads++;
    const gate = this.gate;
    for await (const page of super.pages(source, pageSize)) {
      await gate;
      yield page;
    }
  }
}

const node = (n: number, shard: string | null, instanceHost: string | null = null): BareMetalNode => ({
  uuid: uuid(n),
  name: n % 4 === 0 ? null : `node-${n}`,
  shard,
  conductor_group: n % 2 === 0 ? "" : "group-b",
  instance_host: instanceHost,
});

/** What a listing must read as: every node of the shard as the API writes it, in uuid order. */
async function streamed(nodes: NodeRegistry, shard: string, extra: string): Promise<string> {
  const objects: string[] = [];
  for await (const page of nodes.pages({ kind: "places", places: [shard] }))
    objects.push(...page.map((n) => nodeJson(n, extra)));
  return objects.join(",");
}

const versionOf = async (nodes: NodeRegistry, shard: string) => (await nodes.placeVersions([shard]))[0]!;

describe("The kept listings of shards' nodes (ShardNodesCache)", () => {
  let nodes: CountingRegistry;

  beforeEach(async () => {
    nodes = new CountingRegistry(new MemoryNodes());
    await nodes.upsertValidated([
      ...Array.from({ length: 40 }, (_, i) => node(i + 1, "rack-a")),
      ...Array.from({ length: 7 }, (_, i) => node(100 + i, "rack-b")),
      // an instance host JSON must escape, and past ASCII: the listing is cut by bytes
      node(200, "rack-a", 'compute-"ü"-0'),
      node(201, null),
    ]);
  });

  it("answers the bytes a streamed listing would write, read once while the shard's version stays", async () => {
    const cache = new ShardNodesCache(nodes);
    const extra = ',"token":7,"via":"lease"';
    const first = await cache.joined("rack-a", extra);
    expect(first!.toString()).to.equal(await streamed(nodes, "rack-a", extra));
    const reads = nodes.reads;
    expect((await cache.joined("rack-a", extra))!.toString()).to.equal(first!.toString());
    expect(nodes.reads, "a second list of an unchanged shard reads no node").to.equal(reads);
  });

  it("writes a new holder's fields after every node without reading the nodes again", async () => {
    const cache = new ShardNodesCache(nodes);
    const extras = [',"token":12345678,"via":"lease"', "", ',"token":8,"via":"lease"'];
    const expected = await Promise.all(extras.map((extra) => streamed(nodes, "rack-a", extra)));
    await cache.joined("rack-a", ',"token":7,"via":"lease"');
    const reads = nodes.reads;
    for (const [i, extra] of extras.entries())
      expect((await cache.joined("rack-a", extra))!.toString(), extra).to.equal(expected[i]);
    expect(nodes.reads).to.equal(reads);
  });

  it("reads the shard again once its version moves, and lists the node that moved in", async () => {
    const cache = new ShardNodesCache(nodes);
    const extra = ',"token":7,"via":"lease"';
    await cache.joined("rack-a", extra, await versionOf(nodes, "rack-a"));
    await nodes.upsertValidated([node(300, "rack-a")]);
    const after = await cache.joined("rack-a", extra, await versionOf(nodes, "rack-a"));
    expect(after!.toString()).to.equal(await streamed(nodes, "rack-a", extra));
    expect(after!.toString()).to.contain(uuid(300));
  });

  it("answers a caller that read a later version from a read of its own, not from a build under way", async () => {
    const cache = new ShardNodesCache(nodes);
    const extra = ',"token":7,"via":"lease"';
    const release = nodes.hold();
    const before = cache.joined("rack-a", extra, await versionOf(nodes, "rack-a"));
    // The first list's build has read the shard's nodes and not finished when the node is written.
    while (nodes.reads === 0) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    await nodes.upsertValidated([node(300, "rack-a")]);
    const after = cache.joined("rack-a", extra, await versionOf(nodes, "rack-a"));
    release();
    expect((await before)!.toString()).to.not.contain(uuid(300));
    expect((await after)!.toString(), "the node written before the version was read").to.contain(uuid(300));
  });

  it("keeps the most recently listed shards within its budget in bytes, and answers right either way", async () => {
    const extra = ',"token":1,"via":"lease"';
    const rackA = Buffer.byteLength(await streamed(nodes, "rack-a", extra));
    const rackB = Buffer.byteLength(await streamed(nodes, "rack-b", extra));
    // Room for rack-a's listing (and its offsets), not for both.
    const cache = new ShardNodesCache(nodes, rackA + 4 * 41 + Math.floor(rackB / 2));
    await cache.joined("rack-a", extra);
    await cache.joined("rack-b", extra); // rack-a, the least recently listed, goes
    let reads = nodes.reads;
    expect((await cache.joined("rack-b", extra))!.toString()).to.equal(
      await streamed(nodes, "rack-b", extra),
    );
    expect(nodes.reads - reads, "rack-b kept").to.equal(1); // the streamed() above
    reads = nodes.reads;
    expect((await cache.joined("rack-a", extra))!.toString()).to.equal(
      await streamed(nodes, "rack-a", extra),
    );
    expect(nodes.reads - reads, "rack-a read again, then streamed() once").to.equal(2);
  });

  it("keeps no listing of a shard past 5,000 nodes (streamed instead), until its version moves", async () => {
    await nodes.upsertValidated(Array.from({ length: 5001 }, (_, i) => node(10_000 + i, "rack-big")));
    const cache = new ShardNodesCache(nodes);
    expect(await cache.joined("rack-big", "")).to.equal(null);
    const reads = nodes.reads;
    expect(await cache.joined("rack-big", "")).to.equal(null);
    expect(nodes.reads, "not read again at the same version").to.equal(reads);
  });
});
