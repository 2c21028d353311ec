import { expect } from "chai";
import { decodeBulk, unpackNodes, type PackedNodes } from "../../src/api/decode/bulk.js";
import { DecodePool } from "../../src/api/decode/decode-pool.js";
import type { Decoded } from "../../src/api/decode/result.js";
import { BulkNodesRequest, type BareMetalNode } from "../../src/core/node.js";
import { uuid } from "../helpers/http.js";

/**
 * Large bodies decode in the pool's worker and come back as bytes the event loop unpacks
 * a chunk at a time (src/api/decode/bulk.ts, transfer.ts): the same nodes as decoding on
 * the loop, in the same order, and neither way through the worker a copy the loop pays for.
 */
describe("the decode pool hands bulk bodies to its worker and back without copies", function () {
  this.timeout(20_000);
  const pool = new DecodePool([]);
  after(() => pool.close());

  /**
   * 3,000 nodes (about 300 KB: the worker's size) with every kind of field; instance hosts
   * of every shape a host takes (a name, a dotted name, an address), some in upper case
   * (their records carry a host key). Every field is ASCII by its grammar.
   */
  const nodes = Array.from({ length: 3000 }, (_, i) => ({
    uuid: uuid(i + 1),
    name: i % 7 === 0 ? null : `node-${i}`,
    shard: i % 3 === 0 ? null : `shard-${i % 5}`,
    conductor_group: i % 4 === 0 ? "" : "Rack-1",
    instance_host:
      i % 2 === 0 ? null : [`Compute-${i % 4}`, `Host-${i}.Example.ORG`, `fd00::${i.toString(16)}`][i % 3]!,
  }));
  const text = JSON.stringify({ nodes });
  const expected = BulkNodesRequest.parse(JSON.parse(text)).nodes as BareMetalNode[];
  /** The body as a socket gives it: chunks of up to 64 KiB, each in memory of its own, cut anywhere (inside a character too). */
  const asRead = (body: string) => {
    const bytes = Buffer.from(body);
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 65_536) chunks.push(Buffer.from(bytes.subarray(i, i + 65_536)));
    return chunks;
  };

  const unpacked = (decoded: Decoded<PackedNodes>, size: number) => {
    if (!decoded.ok) throw new Error(`not decoded: ${JSON.stringify(decoded)}`);
    const chunks = [...unpackNodes(decoded.value, size)];
    return { chunks, nodes: chunks.flat() };
  };

  it("decodes to the nodes the body lists, in chunks of the size asked", async () => {
    const decoded = await pool.decode({ kind: "bulk" }, asRead(text));
    for (const size of [250, 7, 3000, 5000]) {
      const { chunks, nodes: got } = unpacked(decoded, size);
      expect(got).to.deep.equal(expected);
      expect(chunks.map((c) => c.length)).to.deep.equal(
        Array.from({ length: Math.ceil(3000 / size) }, (_, i) => Math.min(size, 3000 - i * size)),
      );
    }
    // The same as decoding on the event loop (small bodies do).
    expect(unpacked(decodeBulk(text), 250).nodes).to.deep.equal(expected);
  });

  it("moves chunks that own their memory to the worker, and copies those that share it", async () => {
    const owned = asRead(text);
    expect(owned.length).to.be.greaterThan(3);
    await pool.decode({ kind: "bulk" }, owned);
    expect(
      owned.map((chunk) => chunk.buffer.byteLength),
      "every chunk was transferred, not copied",
    ).to.deep.equal(owned.map(() => 0));

    // A body that is a view into larger memory: the rest of that memory stays as it was.
    const larger = Buffer.concat([Buffer.from("before"), Buffer.from(text), Buffer.from("after")]);
    const view = larger.subarray(6, 6 + Buffer.byteLength(text));
    expect(unpacked(await pool.decode({ kind: "bulk" }, [view]), 250).nodes).to.deep.equal(expected);
    expect(larger.toString("utf8", 0, 6)).to.equal("before");
    expect(larger.toString("utf8", larger.length - 5)).to.equal("after");
  });

  it("answers a body at fault with its fields, through the worker as on the loop", async () => {
    const bad = JSON.stringify({ nodes: [...nodes.slice(0, 2999), { uuid: "not-a-uuid", name: "x" }] });
    const decoded = await pool.decode({ kind: "bulk" }, asRead(bad));
    expect(decoded.ok).to.equal(false);
    expect(decoded).to.deep.equal(decodeBulk(bad));
    expect(JSON.stringify(decoded)).to.include("nodes[2999].uuid");
  });
});
