import { FenceKey, FencingToken } from "../../core/lease/bounds.js";
import { ShardName } from "../../core/names.js";

/**
 * The fenced endpoint's request target, read once: `/fenced/{shard}/lease-{token}-{key}/ironic`
 * and Ironic's own path below it. The node check and the request forwarded to Ironic both
 * read `segments` and `path` from here, so they cannot read the path differently: each
 * segment is percent-decoded exactly once and sent re-encoded (`path`), and whatever could
 * make Ironic, a proxy or a URL parser see another path than the check saw — a dot segment
 * (`..`, `%2e%2e`), an empty one (`//`), a slash or backslash inside a segment (`%2f`,
 * `%5c`), a raw backslash, a control character — is refused, never resolved.
 *
 * Pure: a string in, a target or a refusal out.
 */
export interface FencedTarget {
  shard: string;
  token: number;
  fenceKey: string;
  /** Ironic's path, decoded: one entry a segment ("" last for a trailing slash) */
  segments: readonly string[];
  /** the same path as sent to Ironic: "/" and each segment encoded canonically */
  path: string;
  /** the query as the caller sent it, with its "?" ("" for none); it names no path */
  query: string;
  /** the endpoint's own base, canonical: what Ironic's links are rewritten to */
  base: string;
}

/** Why a request target is refused, for the answer: which part, and what is wrong with it. */
export interface FencedPathRefusal {
  /** 404: not this endpoint's shape at all; 400: its shape, with a part that cannot be read safely */
  status: 400 | 404;
  field: "path" | "shard" | "lease" | "ironic_path" | "query";
  reason: string;
}

export type FencedParse = { ok: true; target: FencedTarget } | { ok: false; refusal: FencedPathRefusal };

/**
 * The lease segment: the token and the key, not a bare number — keystoneauth's version
 * discovery reads a version-like segment in an endpoint's path (`v1`, or a number just
 * before the last segment) as the API version and takes what follows for a project id, and
 * the client would then ask for paths that exist nowhere (seen with openstacksdk 0.101 /
 * keystoneauth1 5.0).
 */
const LEASE_SEGMENT = /^lease-([0-9]{1,16})-([0-9a-f]{32})$/;

/** RFC 3986 pchar less "%": left as it is in a segment; every other byte is percent-encoded. */
const PCHAR = /[A-Za-z0-9\-._~!$&'()*+,;=:@]/;

/** A decoded segment as sent on: the same bytes, written one canonical way. */
export function encodeSegment(segment: string): string {
  let out = "";
  for (const char of segment) {
    if (PCHAR.test(char)) out += char;
    else
      for (const byte of Buffer.from(char, "utf8"))
        out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Decoded segments as a path to send: "/" and each segment encoded canonically. */
export function pathOf(segments: readonly string[]): string {
  return `/${segments.map(encodeSegment).join("/")}`;
}

const refuse = (status: 400 | 404, field: FencedPathRefusal["field"], reason: string): FencedParse => ({
  ok: false,
  refusal: { status, field, reason },
});

/** A segment decoded once, or why it cannot be (null: it is fine). */
function decodeSegment(raw: string): { value: string } | { problem: string } {
  let value: string;
  try {
    value = decodeURIComponent(raw);
  } catch {
    return { problem: `segment ${JSON.stringify(raw)} is not valid percent-encoding` };
  }
  if (value.includes("/") || value.includes("\\"))
    return { problem: `segment ${JSON.stringify(raw)} holds an encoded slash or backslash` };
  if (value === "." || value === "..")
    return { problem: `segment ${JSON.stringify(raw)} is a dot segment: name the path itself` };
  if (/[\u0000-\u001f\u007f]/.test(value))
    return { problem: `segment ${JSON.stringify(raw)} holds a control character` };
  return { value };
}

const NOT_THIS_ENDPOINT =
  "the path is /fenced/{shard}/lease-{token}-{fence_key}/ironic/..., as the shard's ironic_endpoint gives it";

/** Read `url` (the request line's target) as the fenced endpoint's: a target, or why not. */
export function parseFencedUrl(url: string): FencedParse {
  const queryAt = url.indexOf("?");
  const rawPath = queryAt < 0 ? url : url.slice(0, queryAt);
  const query = queryAt < 0 ? "" : url.slice(queryAt);
  const parts = rawPath.split("/");
  if (parts[0] !== "" || parts[1] !== "fenced" || parts.length < 5 || parts[4] !== "ironic")
    return refuse(404, "path", NOT_THIS_ENDPOINT);
  if (rawPath.includes("\\")) return refuse(400, "path", "a backslash is no path separator here: send /");
  if (rawPath.includes("#")) return refuse(400, "path", "a fragment (#) is not sent to a server");
  // Printable ASCII only: what a client must percent-encode, a proxy may read another way.
  if (!/^[\x21-\x7e]*$/.test(query) || query.includes("#"))
    return refuse(400, "query", "holds a character that must be percent-encoded");

  const shardSegment = decodeSegment(parts[2]!);
  if ("problem" in shardSegment) return refuse(400, "shard", shardSegment.problem);
  const shard = ShardName.safeParse(shardSegment.value);
  if (!shard.success) return refuse(404, "shard", `${NOT_THIS_ENDPOINT}: not a shard name`);
  const lease = LEASE_SEGMENT.exec(parts[3]!);
  const token = FencingToken.safeParse(Number(lease?.[1]));
  const fenceKey = FenceKey.safeParse(lease?.[2]);
  if (lease === null || !token.success || !fenceKey.success)
    return refuse(404, "lease", `${NOT_THIS_ENDPOINT}: not a lease's token and fence key`);

  const rawIronic = parts.slice(5);
  const segments: string[] = [];
  for (const [i, raw] of rawIronic.entries()) {
    // One trailing slash is a path of its own to Ironic (a collection's root); `//` is not.
    if (raw === "" && i < rawIronic.length - 1)
      return refuse(400, "ironic_path", "an empty segment (//): name the path itself");
    const decoded = decodeSegment(raw);
    if ("problem" in decoded) return refuse(400, "ironic_path", decoded.problem);
    segments.push(decoded.value);
  }
  return {
    ok: true,
    target: {
      shard: shard.data,
      token: token.data,
      fenceKey: fenceKey.data,
      segments,
      path: pathOf(segments),
      query,
      base: `/fenced/${encodeSegment(shard.data)}/lease-${token.data}-${fenceKey.data}/ironic`,
    },
  };
}

/**
 * Ironic's resources that belong to a node (nova writes VIFs under the node, volume
 * targets for boot from volume beside it), by their collection's path segments, with the
 * field naming the node in the resource Ironic has and in the body that creates one.
 */
export const NODE_OWNED: ReadonlyArray<{
  collection: string;
  stored: string;
  created: string;
}> = [
  { collection: "ports", stored: "node_uuid", created: "node_uuid" },
  { collection: "portgroups", stored: "node_uuid", created: "node_uuid" },
  { collection: "volume/connectors", stored: "node_uuid", created: "node_uuid" },
  { collection: "volume/targets", stored: "node_uuid", created: "node_uuid" },
  // An allocation names its node once allocated; one created without a node would let
  // Ironic pick any node, of any shard.
  { collection: "allocations", stored: "node_uuid", created: "node" },
];

/** What a write is about, read from its (decoded) segments: the only writes a shard's holder makes. */
export type WriteSubject =
  /** `/v1/nodes/{node}` and anything under it */
  | { kind: "node"; node: string }
  /** one entry of a node-owned collection, by its id */
  | { kind: "owned"; owned: (typeof NODE_OWNED)[number]; id: string }
  /** a new entry of a node-owned collection (POST to the collection) */
  | { kind: "create"; owned: (typeof NODE_OWNED)[number] }
  /** anything else: a chassis, a deploy template, a new node, a collection as a whole */
  | { kind: "none" };

/** What the write `method` on `segments` (see FencedTarget) is about. */
export function writeSubject(method: string, segments: readonly string[]): WriteSubject {
  if (segments[0] !== "v1") return { kind: "none" };
  if (segments[1] === "nodes" && segments.length >= 3 && segments[2] !== "")
    return { kind: "node", node: segments[2]! };
  // The collection, then at most an id and a trailing slash.
  const rest = segments.at(-1) === "" ? segments.slice(1, -1) : segments.slice(1);
  for (const owned of NODE_OWNED) {
    const named = owned.collection.split("/");
    if (!named.every((part, i) => rest[i] === part)) continue;
    const tail = rest.slice(named.length);
    if (tail.length === 0) return method === "POST" ? { kind: "create", owned } : { kind: "none" };
    if (tail.length === 1) return { kind: "owned", owned, id: tail[0]! };
    return { kind: "none" };
  }
  return { kind: "none" };
}

/** The path of a node-scoped write with its node named by `uuid`: the node the check read, by its own id. */
export function withNode(segments: readonly string[], uuid: string): string {
  return pathOf([segments[0]!, segments[1]!, uuid, ...segments.slice(3)]);
}
