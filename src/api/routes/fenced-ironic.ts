import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { FencingToken, renewDeadlineMs } from "../../domain/lease.js";
import { ShardName } from "../../domain/names.js";
import { fenceServing } from "../../shards/revocation.js";
import type { ShardCatalog } from "../../shards/definitions.js";
import type { Store } from "../../store/store.js";
import { replaceAllBytes } from "../../text/bytes.js";
import { readRequestBody } from "../http/body.js";
import { conflict, HttpError } from "../http/errors.js";
import { FENCED_BODY } from "../http/limits.js";
import type { BridgeMetrics } from "../http/metrics.js";
import { serveRaw } from "../http/raw-route.js";
import { rawHandler, type RawHandler } from "../http/mounted-routes.js";
import type { Operation } from "../openapi/operation.js";

/**
 * `/fenced/{shard}/lease-{token}/ironic` + Ironic's own path. Not under /v1, and the token
 * not a bare number: keystoneauth's version discovery reads a version-like segment in an
 * endpoint's path (`v1`, or a number just before the last segment) as the API version and
 * takes what follows for a project id, and the client would then ask for paths that exist
 * nowhere (seen with openstacksdk 0.101 / keystoneauth1 5.0).
 */
const FENCED_PATH = /^\/fenced\/([^/?#]+)\/lease-([^/?#]+)\/ironic(\/[^?#]*)?(\?.*)?$/;
const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);
/**
 * The methods passed on: Ironic's API has no other, and a method outside both lists (a
 * TRACE, say) would otherwise reach Ironic unchecked as if it were a read.
 */
const FORWARDED = ["GET", "HEAD", "OPTIONS", ...MUTATING];
/** Version discovery at the endpoint itself, and every Ironic path under it. */
const FENCED_ROUTES = FORWARDED.flatMap((method) => [
  { method, path: "/fenced/:shard/lease-:token/ironic" },
  { method, path: "/fenced/:shard/lease-:token/ironic/*ironic_path" },
]);
/** Ironic's node-scoped paths: the node is the first segment after /v1/nodes/. */
const NODE_SCOPED = /^\/v1\/nodes\/([^/?#]+)/;
/**
 * Ironic's resources that belong to a node (nova writes VIFs under the node, volume
 * targets for boot from volume beside it): the collection, its id, and the field that
 * names the node — in the resource Ironic has, or in the body that creates one.
 */
const NODE_OWNED =
  /^\/v1\/(ports|portgroups|volume\/connectors|volume\/targets|allocations)(?:\/([^/?#]+))?\/?$/;
const OWNER_FIELD: Record<string, { stored: string; created: string }> = {
  ports: { stored: "node_uuid", created: "node_uuid" },
  portgroups: { stored: "node_uuid", created: "node_uuid" },
  "volume/connectors": { stored: "node_uuid", created: "node_uuid" },
  "volume/targets": { stored: "node_uuid", created: "node_uuid" },
  // An allocation names its node once allocated; one created without a node would let
  // Ironic pick any node, of any shard.
  allocations: { stored: "node_uuid", created: "node" },
};
/** Hop-by-hop headers (RFC 9110 7.6.1) are the proxy's own, never forwarded. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "content-length",
]);
/** The microversion the node lookup asks for: `shard` is a node field from 1.82. */
const SHARD_MICROVERSION = "1.82";

/** What the fenced endpoint answers: Ironic's answer, or its own refusals (`reaches`: a request that can reach Ironic). */
function fencedAnswers(write: boolean, reaches: boolean): Operation["answers"] {
  // Ironic's own 400, 404 or 409, passed on, share the status with the bridge's refusals.
  const ironic = reaches ? { ironic: true as const } : {};
  const answers: Operation["answers"] = {
    400: { description: "the shard segment is not valid percent-encoding", ...ironic },
    404: {
      description: "not `/fenced/{shard}/lease-{token}/ironic/…`",
      codes: ["fenced.bad_path"],
      ...ironic,
    },
  };
  if (reaches) {
    answers.default = { description: "Ironic's answer, as Ironic gave it (links rewritten)" };
    answers[502] = { description: "Ironic did not answer", codes: ["ironic.unreachable"] };
  }
  if (write)
    answers[409] = {
      description: "fenced: not the live lease, too little of it left, or not a node of this shard",
      codes: ["lease.fenced"],
      ...ironic,
    };
  return answers;
}

/**
 * The fenced Ironic endpoint: one operation per method, at its root (version discovery)
 * and under it. A write at the root is about no node: always refused.
 */
function fencedOperations(method: Operation["method"]): Operation[] {
  const write = ["post", "put", "patch", "delete"].includes(method);
  const operation = (
    root: boolean,
    path: string,
    id: string,
    parameters: Operation["parameters"],
  ): Operation => ({
    method,
    path,
    id,
    tag: "fenced Ironic",
    summary:
      write && root
        ? `${method.toUpperCase()} at the endpoint's root: about no node, always refused`
        : write
          ? `${method.toUpperCase()} to Ironic, only under the shard's live lease, about a node of the shard`
          : `${method.toUpperCase()} to Ironic, passed on as it is`,
    description: write
      ? "Passes only if, now, `token` is the shard's live lease with at least TTL/3 left and the write is about a node Ironic says is in the shard (the node of `/v1/nodes/{node}/…`, or the node a port, portgroup, volume connector or target, or allocation belongs to). Otherwise 409 `shardbridge.lease.fenced` and nothing reaches Ironic. Served only with `serve --ironic URL`."
      : "Reads pass. Links in Ironic's JSON and `Location` are rewritten to this endpoint. Served only with `serve --ironic URL`.",
    access: { kind: "ironic" },
    parameters,
    ...(write && { body: "any" as const }),
    answers: fencedAnswers(write, !(write && root)),
    ...(!write && { store: false as const }),
  });
  const name = method[0]!.toUpperCase() + method.slice(1);
  return [
    operation(true, "/fenced/{shard}/lease-{token}/ironic", `fenced${name}Root`, [
      "fencedShard",
      "fencedToken",
    ]),
    operation(false, "/fenced/{shard}/lease-{token}/ironic/{ironic_path}", `fenced${name}`, [
      "fencedShard",
      "fencedToken",
      "ironicPath",
    ]),
  ];
}

/** The fenced Ironic endpoint's operations, as the document lists them (operations.ts). */
export const FENCED_OPERATIONS: Operation[] = (
  ["get", "head", "options", "post", "put", "patch", "delete"] as const
).flatMap(fencedOperations);

/**
 * The least lease a mutating request must find left, for a lease of `ttlMs`: what a
 * healthy holder always has. It renews every TTL/3 and stops acting at 2/3 TTL after the
 * last renew it sent, and the store counts the TTL from no earlier than that send, so
 * while the holder may act the store's lease has at least TTL/3 left. Less means the
 * writer is past its own deadline (frozen, then resumed): refused, although the lease is
 * still its own for a moment.
 */
export function fenceMarginMs(ttlMs: number): number {
  return ttlMs - renewDeadlineMs(ttlMs);
}

/** 502: Ironic did not answer, whether to a forwarded request or to the fence's own lookup. */
function unreachable(error: unknown): HttpError {
  return new HttpError([
    {
      status: 502,
      code: "shardbridge.ironic.unreachable",
      title: "Ironic did not answer",
      detail: String((error as Error).message ?? error),
    },
  ]);
}

function fenced(detail: string): HttpError {
  return new HttpError([conflict("lease.fenced", "Write fenced", detail)]);
}

interface Upstream {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/**
 * Ironic refused the fence's own look-up for the caller's credentials (401: none, expired,
 * revoked; 403: not allowed to read the node): the write is not forwarded, and Ironic's
 * answer is the caller's, so a client whose token went stale re-authenticates (keystoneauth
 * does on a 401) instead of retrying a 409 as if the node were locked.
 */
class CallerRefused extends Error {
  constructor(readonly answer: Upstream) {
    super(`Ironic answered ${answer.status} to the caller's credentials`);
  }
}

/**
 * The fenced Ironic endpoint: a reverse proxy to `ironicUrl` under
 * `/fenced/{shard}/lease-{token}/ironic/...`, where nova-compute under `shardbridge run`
 * points its ironic client (`[ironic]endpoint_override`). Reads pass. A mutating request
 * passes only if, at that moment, `token` is the shard's live lease with at least
 * fenceMarginMs left, and — on a node-scoped path — Ironic says the node is in that
 * shard; otherwise 409 `shardbridge.lease.fenced`, and nothing reaches Ironic. The
 * caller's own headers (X-Auth-Token, microversions) are forwarded and no credential of
 * the bridge is ever added: the path grants nothing Ironic would not grant the caller.
 * Links in Ironic's answers are rewritten to the proxy's own base, so an unmodified
 * client that follows them stays behind the fence.
 */
export function fencedIronic(context: {
  store: Store;
  catalog: ShardCatalog;
  metrics: BridgeMetrics;
  ironicUrl: string;
}): RawHandler {
  const ironic = new URL(context.ironicUrl.replace(/\/+$/, ""));
  const ironicBase = ironic.href.replace(/\/+$/, "");
  const ironicBaseBytes = Buffer.from(ironicBase);
  const send = ironic.protocol === "https:" ? httpsRequest : httpRequest;

  const forward = (
    method: string,
    path: string,
    headers: Record<string, string | string[]>,
    body: Buffer | null,
    timeoutMs = 30_000,
  ): Promise<Upstream> =>
    new Promise((resolve, reject) => {
      const upstream = send(
        new URL(`${ironic.pathname.replace(/\/+$/, "")}${path}`, ironic),
        { method, headers: { ...headers, ...(body !== null && { "content-length": String(body.length) }) } },
        (answer) => {
          const chunks: Buffer[] = [];
          answer.on("data", (c: Buffer) => chunks.push(c));
          answer.on("end", () =>
            resolve({
              status: answer.statusCode ?? 502,
              headers: answer.headers as Record<string, string | string[]>,
              body: Buffer.concat(chunks),
            }),
          );
          answer.on("error", reject);
        },
      );
      upstream.setTimeout(timeoutMs, () =>
        upstream.destroy(new Error(`Ironic did not answer within ${Math.round(timeoutMs)} ms`)),
      );
      upstream.on("error", reject);
      upstream.end(body ?? undefined);
    });

  const ironicJson = async (path: string, headers: Record<string, string | string[]>) => {
    const answer = await forward(
      "GET",
      path,
      { ...headers, "x-openstack-ironic-api-version": SHARD_MICROVERSION },
      null,
    ).catch((error: unknown) => {
      throw unreachable(error);
    });
    if (answer.status === 401 || answer.status === 403) throw new CallerRefused(answer);
    return {
      status: answer.status,
      json: answer.status === 200 ? (JSON.parse(answer.body.toString("utf8")) as any) : null,
    };
  };

  /**
   * The node a write is about: named in its path, or the owner of the port, portgroup,
   * volume connector or target, or allocation it changes or creates. Null: the write is
   * about no node Ironic knows (Ironic answers it: 404); a refusal for a write that is
   * about no node at all (a chassis, a deploy template: not a shard holder's to make).
   */
  const nodeOfWrite = async (
    method: string,
    path: string,
    body: Buffer,
    headers: Record<string, string | string[]>,
  ): Promise<string | null> => {
    const scoped = NODE_SCOPED.exec(path)?.[1];
    if (scoped !== undefined) return decodeURIComponent(scoped);
    const owned = NODE_OWNED.exec(path);
    if (owned === null)
      throw fenced(
        `${method} ${path} is about no node: a shard's holder writes its nodes and what belongs to them`,
      );
    const [, collection, id] = owned;
    const field = OWNER_FIELD[collection!]!;
    let node: unknown;
    if (id === undefined) {
      if (method !== "POST") throw fenced(`${method} on the collection ${collection} is about no one node`);
      try {
        node = (JSON.parse(body.toString("utf8")) as Record<string, unknown>)[field.created];
      } catch {
        node = undefined;
      }
      if (typeof node !== "string" || node === "")
        throw fenced(
          `a new ${collection} entry must name its node in "${field.created}", a node of this shard`,
        );
      return node;
    }
    const stored = await ironicJson(`/v1/${collection}/${id}?fields=${field.stored}`, headers);
    if (stored.status === 404) return null;
    if (stored.status !== 200)
      throw fenced(
        `could not read which node ${collection} ${decodeURIComponent(id)} belongs to (${stored.status})`,
      );
    node = stored.json[field.stored];
    if (typeof node !== "string") throw fenced(`${collection} ${decodeURIComponent(id)} belongs to no node`);
    return node;
  };

  /**
   * Refuse unless `token` holds `shard` now with the margin left and the node the write
   * is about is the shard's; answers the lease's time left, which bounds the forwarded write.
   */
  const check = async (
    shard: string,
    token: number,
    method: string,
    path: string,
    body: Buffer,
    headers: Record<string, string | string[]>,
  ): Promise<number> => {
    const { allowed, current } = await fenceServing(context.store, context.catalog, { shard, token });
    if (!allowed || current === null) throw fenced(`token ${token} is not the live lease of shard ${shard}`);
    const margin = fenceMarginMs(context.catalog.ttlMsFor(shard));
    if (current.ttlMs < margin)
      throw fenced(
        `the lease of shard ${shard} has ${current.ttlMs} ms left, less than the ${margin} ms a holder ` +
          "within its renew deadline always has: the writer is past its own deadline",
      );
    const node = await nodeOfWrite(method, path, body, headers);
    if (node === null) return current.ttlMs; // Ironic answers the write itself: no such thing
    const lookup = await ironicJson(`/v1/nodes/${encodeURIComponent(node)}?fields=uuid,shard`, headers);
    if (lookup.status === 404) return current.ttlMs;
    if (lookup.status !== 200)
      throw fenced(`could not read node ${node}'s shard from Ironic (${lookup.status})`);
    const nodeShard = (lookup.json as { shard: string | null }).shard;
    if (nodeShard !== shard) throw fenced(`node ${node} is in shard ${nodeShard ?? "(none)"}, not ${shard}`);
    return current.ttlMs;
  };

  return rawHandler(FENCED_ROUTES, (req, res) => {
    const match = FENCED_PATH.exec(req.url ?? "");
    if (match === null || !FORWARDED.includes(req.method ?? "")) return false;
    serveRaw(req, res, "/fenced/:shard/:lease/ironic", context.metrics, { pathField: "shard" }, async () => {
      const method = req.method ?? "GET";
      const path = `${match[3] ?? "/"}${match[4] ?? ""}`;
      const shard = ShardName.safeParse(decodeURIComponent(match[1]!));
      const token = FencingToken.safeParse(Number(match[2]));
      if (!shard.success || !token.success)
        throw new HttpError([
          {
            status: 404,
            code: "shardbridge.fenced.bad_path",
            title: "Not a fenced endpoint",
            detail:
              "the path is /fenced/{shard}/lease-{token}/ironic/..., with a shard name and a fencing token",
          },
        ]);
      const body = await readRequestBody(req, res, FENCED_BODY.limit, "any");
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(req.headers))
        if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      const label = context.metrics.shardLabel(shard.data);
      // A write is given no longer than its lease has left: the check and Ironic's apply
      // are two steps, and the margin is what keeps the lease ours in between.
      let timeoutMs = 30_000;
      let upstream: Upstream | null = null;
      if (MUTATING.has(method)) {
        try {
          timeoutMs = await check(shard.data, token.data, method, path, body, headers);
        } catch (error) {
          context.metrics.fencedRequests.at(label, "refused").inc();
          if (!(error instanceof CallerRefused)) throw error;
          upstream = error.answer;
        }
      }
      if (upstream === null) {
        try {
          upstream = await forward(method, path, headers, body.length === 0 ? null : body, timeoutMs);
        } catch (error) {
          throw unreachable(error);
        }
        context.metrics.fencedRequests.at(label, "forwarded").inc();
      }
      // Ironic's links point at itself: point them at this endpoint instead, as the client
      // reached it (behind a TLS-terminating balancer: https, from X-Forwarded-Proto).
      const base = `${clientScheme(req)}://${req.headers.host}/fenced/${match[1]}/lease-${match[2]}/ironic`;
      // As bytes, not text: a page of 1,000 nodes is half a megabyte (see replaceAllBytes).
      const rewritten = replaceAllBytes(upstream.body, ironicBaseBytes, Buffer.from(base));
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(upstream.headers))
        if (!HOP_BY_HOP.has(name)) out[name] = value;
      if (typeof out.location === "string") out.location = out.location.split(ironicBase).join(base);
      return { status: upstream.status, headers: out, body: rewritten };
    });
    return true;
  });
}

/**
 * The scheme the client used: a balancer that terminates TLS says so in
 * X-Forwarded-Proto. Trusting it costs nothing: it only shapes the links in the answer
 * to the same client.
 */
function clientScheme(req: IncomingMessage): "http" | "https" {
  const forwarded = req.headers["x-forwarded-proto"];
  const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(",")[0]?.trim().toLowerCase();
  return first === "https" ? "https" : "http";
}
