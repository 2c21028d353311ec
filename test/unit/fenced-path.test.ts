import { expect } from "chai";
import fc from "fast-check";
import { encodeSegment, parseFencedUrl, writeSubject, type FencedTarget } from "../../src/api/fenced/path.js";

/**
 * The fenced endpoint reads its path once (parseFencedUrl) and forwards what it read:
 * whatever a caller writes, the path Ironic is sent is the path the node check read, and
 * no URL parser, proxy or WSGI server on the way can read it as another.
 */
const KEY = "0123456789abcdef0123456789abcdef";
const BASE = `/fenced/rack-a/lease-42-${KEY}/ironic`;
const MINE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123";
const THEIRS = "f0e1d2c3-b4a5-4697-8877-665544332211";

const parsed = (url: string): FencedTarget => {
  const result = parseFencedUrl(url);
  if (!result.ok) throw new Error(`${url}: refused (${result.refusal.reason})`);
  return result.target;
};
const refusal = (url: string) => {
  const result = parseFencedUrl(url);
  return result.ok ? null : result.refusal;
};

/** What a WHATWG URL parser (fetch, Node's URL, a browser) makes of a path: dot segments resolved, backslashes as slashes. */
const asUrlParserReads = (path: string) => new URL(path, "http://ironic.example").pathname;

describe("The fenced endpoint's path, read once", () => {
  it("reads the shard, the token, the key and Ironic's path, and writes the path one way", () => {
    const target = parsed(`${BASE}/v1/nodes/${MINE}/traits/CUSTOM_A?fields=uuid`);
    expect(target).to.deep.include({
      shard: "rack-a",
      token: 42,
      fenceKey: KEY,
      segments: ["v1", "nodes", MINE, "traits", "CUSTOM_A"],
      path: `/v1/nodes/${MINE}/traits/CUSTOM_A`,
      query: "?fields=uuid",
      base: BASE,
    });
    // Decoded once, encoded one way: a needless escape is undone, a needed one kept.
    expect(parsed(`${BASE}/v1/%6Eodes/a%20b%25c`).path).to.equal("/v1/nodes/a%20b%25c");
    expect(parsed(BASE).path).to.equal("/");
    expect(parsed(`${BASE}/`).segments).to.deep.equal([""]);
    expect(parsed(`${BASE}/v1/nodes/`).path).to.equal("/v1/nodes/");
  });

  it("refuses, never resolves, what another reader could take for another path", () => {
    for (const steer of [
      `/v1/nodes/${MINE}/../${THEIRS}`,
      `/v1/nodes/${MINE}/%2e%2e/${THEIRS}`,
      `/v1/nodes/${MINE}/%2E./${THEIRS}`,
      `/v1/nodes/${MINE}/./traits`,
      `/v1/nodes/${MINE}%2f..%2f${THEIRS}`,
      `/v1/nodes/${MINE}%2F..%2F..%2Fchassis`,
      `/v1/nodes/${MINE}\\..\\${THEIRS}`,
      `/v1/nodes/${MINE}%5c..%5c${THEIRS}`,
      `//evil.example/v1/nodes`,
      `/v1//nodes/${MINE}`,
      `/v1/nodes/${MINE}%00`,
      `/v1/nodes/%E0%A4%A`,
      `/v1/nodes/${MINE}#/../${THEIRS}`,
    ]) {
      const found = refusal(`${BASE}${steer}`);
      expect(found, steer).to.not.equal(null);
      expect(found!.status, steer).to.equal(400);
    }
    expect(refusal(`${BASE}/v1/nodes?x=a b`)).to.deep.include({ status: 400, field: "query" });
    expect(refusal(`/fenced/%E0%A4%A/lease-42-${KEY}/ironic/v1`)).to.deep.include({
      status: 400,
      field: "shard",
    });
  });

  it("is not the endpoint without the shape /fenced/{shard}/lease-{token}-{key}/ironic (404)", () => {
    for (const url of [
      "/fenced/rack-a/lease-42/ironic/v1/nodes",
      `/fenced/rack-a/lease-42-${KEY.toUpperCase()}/ironic`,
      `/fenced/rack-a/lease-x-${KEY}/ironic`,
      `/fenced/rack-a/lease-0-${KEY}/ironic`,
      `/fenced/rack-a/lease-42-${KEY}/ironic@evil.example/v1`,
      `/fenced/rack-a/lease-42-${KEY}/ironicx/v1`,
      `/fenced/rack a/lease-42-${KEY}/ironic/v1`,
      "/fenced/rack-a",
    ])
      expect(refusal(url)?.status, url).to.equal(404);
  });

  it("names the node a write is about only on /v1/nodes/{node}, or a node's own resource", () => {
    expect(writeSubject("PATCH", ["v1", "nodes", MINE])).to.deep.equal({ kind: "node", node: MINE });
    expect(writeSubject("PUT", ["v1", "nodes", MINE, "states", "power"])).to.deep.include({ kind: "node" });
    expect(writeSubject("POST", ["v1", "nodes"])).to.deep.equal({ kind: "none" });
    expect(writeSubject("POST", ["v1", "nodes", ""])).to.deep.equal({ kind: "none" });
    expect(writeSubject("POST", ["v1", "chassis"])).to.deep.equal({ kind: "none" });
    expect(writeSubject("POST", ["v1", "ports"])).to.deep.include({ kind: "create" });
    expect(writeSubject("PATCH", ["v1", "ports"])).to.deep.equal({ kind: "none" });
    expect(writeSubject("DELETE", ["v1", "volume", "targets", "t1"])).to.deep.include({
      kind: "owned",
      id: "t1",
    });
    expect(writeSubject("DELETE", ["v1", "ports", "p1", "x"])).to.deep.equal({ kind: "none" });
    expect(writeSubject("PATCH", ["v2", "nodes", MINE])).to.deep.equal({ kind: "none" });
  });

  /** Pieces a path is made of, the dangerous ones among them. */
  const piece = fc.constantFrom(
    "v1",
    "nodes",
    "ports",
    "volume",
    "targets",
    "chassis",
    MINE,
    THEIRS,
    "node-name",
    "..",
    ".",
    "%2e%2e",
    "%2E",
    "%2f",
    "%2F",
    "%5c",
    "\\",
    "",
    "%00",
    "%",
    "%zz",
    "a%20b",
    "é",
    "%C3%A9",
    ";x",
    "@",
    ":",
    "?",
    "#",
  );
  const ironicPath = fc
    .array(fc.array(piece, { minLength: 1, maxLength: 3 }), { minLength: 0, maxLength: 7 })
    .map((segments) => segments.map((parts) => parts.join("")).join("/"));

  it("forwards only what it checked: any path it accepts is read by a URL parser as the same path, segment for segment", () => {
    fc.assert(
      fc.property(ironicPath, fc.constantFrom("GET", "PATCH", "PUT", "POST", "DELETE"), (path, method) => {
        const result = parseFencedUrl(`${BASE}/${path}`);
        if (!result.ok) return;
        const { target } = result;
        // The forwarded path is the checked one, as any other reader on the way reads it.
        expect(asUrlParserReads(target.path), path).to.equal(target.path);
        expect(target.path.split("/").slice(1).map(decodeURIComponent), path).to.deep.equal(target.segments);
        // One way of writing it: read again, it is written the same.
        expect(parsed(`${BASE}${target.path}`).path, path).to.equal(target.path);
        expect(target.segments.map(encodeSegment).join("/"), path).to.equal(target.path.slice(1));
        // A write names a node only where Ironic's node routes are, read from the same segments.
        const subject = writeSubject(method, target.segments);
        if (subject.kind === "node") {
          expect(target.segments.slice(0, 2), path).to.deep.equal(["v1", "nodes"]);
          expect(target.segments[2], path).to.equal(subject.node);
        }
        for (const segment of target.segments) expect(segment, path).to.not.match(/^\.{1,2}$|[/\\]/);
      }),
      { numRuns: 20_000, seed: 20261206 },
    );
  });
});
