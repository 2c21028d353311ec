import type { ClientRequest, IncomingMessage, ServerResponse } from "node:http";
import { pipeline, Transform, type TransformCallback } from "node:stream";
import { logger, redactSecrets } from "../../runtime/log.js";
import { fenceServing } from "../../bridge/shards/revocation.js";
import { judgeWriteMargin } from "../../bridge/shards/write-margin.js";
import type { ShardCatalog } from "../../bridge/shards/catalog.js";
import type { Store } from "../../store/store.js";
import { LinkRewrite } from "../fenced/link-rewrite.js";
import { judgedObject, judgedPatch, touching, type Judged } from "../fenced/judge.js";
import {
  parseFencedUrl,
  pathOf,
  withNode,
  writeSubject,
  type FencedPathRefusal,
  type FencedTarget,
  type WriteSubject,
} from "../fenced/path.js";
import { IronicOrigin, readSmallAnswer } from "../fenced/upstream.js";
import { joinChunks, readRequestChunks } from "../http/body.js";
import { conflict, HttpError } from "../http/errors.js";
import { FENCED_BODY } from "../http/limits.js";
import type { BridgeMetrics } from "../http/metrics.js";
import { serveRaw, type RawAnswer } from "../http/raw-route.js";
import { rawHandler, type RawHandler } from "../http/mounted-routes.js";
import type { Operation } from "../openapi/operation.js";

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);
/**
 * The methods passed on: Ironic's API has no other, and a method outside both lists (a
 * TRACE, say) would otherwise reach Ironic unchecked as if it were a read.
 */
const FORWARDED = ["GET", "HEAD", "OPTIONS", ...MUTATING];
/** The route the endpoint is counted and logged under. */
const ROUTE = "/fenced/:shard/:lease/ironic";
/** Hop-by-hop headers (RFC 9110 7.6.1) are the proxy's own, never forwarded; nor is Expect (see below). */
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
  "expect",
]);
/** The microversion the node lookup asks for: `shard` is a node field from 1.82. */
const SHARD_MICROVERSION = "1.82";

/**
 * What one caller may make the endpoint do, whoever it is: the bridge reads no body and
 * asks Ironic nothing for a caller that has not shown the live lease's token and key, and
 * even the holder's requests are bounded in number, size and time.
 */
export interface FencedLimits {
  /** requests through the endpoint at once, all shards together; more are answered 503 */
  concurrency: number;
  /** the longest one request may take, from its arrival to its answer's last byte (a write: also no longer than its lease) */
  deadlineMs: number;
  /** the largest body passed on (streamed to Ironic, never held whole) */
  bodyBytes: number;
  /** the largest body read here to judge a write (a new port's node, a patch's paths) */
  judgedBodyBytes: number;
  /** the largest answer to the fence's own look-ups at Ironic */
  lookupBytes: number;
}

export const FENCED_LIMITS: FencedLimits = {
  concurrency: 64,
  deadlineMs: 60_000,
  bodyBytes: FENCED_BODY.limit,
  judgedBodyBytes: 256 * 1024,
  lookupBytes: 64 * 1024,
};

/** What the fenced endpoint answers: Ironic's answer, or its own refusals (`reaches`: a request that can reach Ironic). */
function fencedAnswers(write: boolean, reaches: boolean): Operation["answers"] {
  // Ironic's own 400, 404 or 409, passed on, share the status with the bridge's refusals.
  const ironic = reaches ? { ironic: true as const } : {};
  const answers: Operation["answers"] = {
    400: {
      description:
        "a path the fence will not read: invalid percent-encoding, a dot segment, `//`, an encoded or raw slash or backslash in a segment, a control character (`field` names the part)",
      codes: ["fenced.bad_path"],
      ...ironic,
    },
    404: {
      description: "not `/fenced/{shard}/lease-{token}-{fence_key}/ironic/…`",
      codes: ["fenced.bad_path"],
      ...ironic,
    },
    409: {
      description: write
        ? "fenced: not the live lease's token and key, too little of the lease left, or not about a node of this shard"
        : "fenced: not the live lease's token and key",
      codes: ["lease.fenced"],
      ...ironic,
    },
    503: {
      description: "too many requests through the fenced endpoint at once: retry after `Retry-After`",
      codes: ["fenced.busy"],
    },
  };
  if (write) answers[413] = { description: "a body over the endpoint's limit", codes: ["body.too_large"] };
  if (reaches) {
    answers.default = { description: "Ironic's answer, as Ironic gave it (links rewritten)" };
    answers[502] = { description: "Ironic did not answer", codes: ["ironic.unreachable"] };
    answers[504] = {
      description: "Ironic did not answer within the endpoint's deadline (a write's: its lease)",
      codes: ["ironic.timeout"],
    };
  }
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
          : `${method.toUpperCase()} to Ironic, under the shard's live lease`,
    description: write
      ? "Passes only if, now, `token` and `fence_key` are the shard's live lease with at least TTL/3 left and the write is about a node Ironic says is in the shard (the node of `/v1/nodes/{node}/…`, forwarded by its uuid; or the node a port, portgroup, volume connector or target, or allocation belongs to, or — created — names). A patch may not move a node to another shard, nor a node's resource to another shard's node. Otherwise 409 `shardbridge.lease.fenced` and nothing reaches Ironic. Served only with `serve --ironic URL`."
      : "Passes only if, now, `token` and `fence_key` are the shard's live lease. Links in Ironic's JSON and `Location` are rewritten to this endpoint. Served only with `serve --ironic URL`.",
    access: { kind: "ironic" },
    parameters,
    ...(write && { body: "any" as const, bodyPolicy: FENCED_BODY }),
    answers: fencedAnswers(write, !(write && root)),
    ...(!write && { store: false as const }),
  });
  const name = method[0]!.toUpperCase() + method.slice(1);
  return [
    operation(true, "/fenced/{shard}/lease-{token}-{fence_key}/ironic", `fenced${name}Root`, [
      "fencedShard",
      "fencedToken",
      "fencedKey",
    ]),
    operation(false, "/fenced/{shard}/lease-{token}-{fence_key}/ironic/{ironic_path}", `fenced${name}`, [
      "fencedShard",
      "fencedToken",
      "fencedKey",
      "ironicPath",
    ]),
  ];
}

/** The fenced Ironic endpoint's operations, as the document lists them (operations.ts). */
export const FENCED_OPERATIONS: Operation[] = (
  ["get", "head", "options", "post", "put", "patch", "delete"] as const
).flatMap(fencedOperations);

function refused(status: number, code: string, title: string, detail: string, field?: string): HttpError {
  return new HttpError([{ status, code, title, detail, ...(field !== undefined && { field }) }]);
}

/** 502: Ironic did not answer, whether to a forwarded request or to the fence's own lookup. */
const unreachable = (error: unknown) =>
  refused(
    502,
    "shardbridge.ironic.unreachable",
    "Ironic did not answer",
    String((error as Error).message ?? error),
  );

const timedOut = (ms: number) =>
  refused(504, "shardbridge.ironic.timeout", "Ironic did not answer in time", `no answer within ${ms} ms`);

function fenced(detail: string): HttpError {
  return new HttpError([conflict("lease.fenced", "Write fenced", detail)]);
}

/**
 * The one answer to any credential that is not the live lease's: a stale token, a wrong
 * key, another agent's lease, no lease at all, a store that is holding the shard after a
 * failover. Told apart, they would let a caller search for a live lease's credential.
 */
const notTheLease = (shard: string) =>
  new HttpError([
    conflict("lease.fenced", "Fenced", `this token and fence key are not the live lease of shard ${shard}`),
  ]);

/** The caller hung up before its answer: counted as such, answered to nobody. */
const callerLeft = () =>
  refused(
    499,
    "shardbridge.request.abandoned",
    "Caller left",
    "the caller closed the connection before its answer",
  );

const pathRefused = ({ status, field, reason }: FencedPathRefusal) =>
  refused(
    status,
    "shardbridge.fenced.bad_path",
    status === 404 ? "Not a fenced endpoint" : "Path not accepted",
    reason,
    field,
  );

/** An answer of Ironic's that the caller gets as it is: Ironic refused the caller's credentials, or has no such thing. */
class IronicAnswered extends Error {
  constructor(readonly answer: { status: number; headers: Record<string, string | string[]>; body: Buffer }) {
    super(`Ironic answered ${answer.status}`);
  }
}

/**
 * Headers that stay on their side of the endpoint: a caller's cookie (the status page's
 * session, same origin) is not Ironic's, nor Ironic's cookies the bridge's origin's; an
 * encoding asked for would keep the fence from reading Ironic's answers (its look-ups, the
 * links it rewrites), so Ironic is asked for none.
 */
const CALLER_ONLY = new Set(["cookie", "accept-encoding"]);
const IRONIC_ONLY = new Set(["set-cookie"]);

/** `headers` less the hop-by-hop ones (those `Connection` names too) and `kept`, to pass on. */
function passedOn(
  headers: Record<string, string | string[] | undefined>,
  kept: ReadonlySet<string>,
): Record<string, string | string[]> {
  const named = new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((name) => name.trim().toLowerCase()),
  );
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !HOP_BY_HOP.has(name) && !kept.has(name) && !named.has(name))
      out[name] = value;
  return out;
}

/** Whether the request has a body to pass on (a GET rarely does; Node's parser says so by these headers). */
const hasBody = (req: IncomingMessage) =>
  req.headers["transfer-encoding"] !== undefined ||
  (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");

/** Passes bytes on until `limit`, then fails the stream (the upstream with it). */
class ByteLimit extends Transform {
  private seen = 0;
  constructor(private readonly limit: number) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.limit) done(new BodyTooLarge(this.limit));
    else done(null, chunk);
  }
}

class BodyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`request body is over the limit of ${limit} bytes`);
  }
}

/**
 * The fenced Ironic endpoint: a reverse proxy to the one Ironic of `serve --ironic URL`
 * under `/fenced/{shard}/lease-{token}-{fence_key}/ironic/...`, where nova-compute under
 * `shardbridge run` points its ironic client (`[ironic]endpoint_override`). Every request
 * must present the shard's live lease (token and key, checked at the store before a byte
 * of its body is read); a mutating one also needs the margin left, and must be about a
 * node Ironic says is in that shard; otherwise 409 `shardbridge.lease.fenced`, and nothing
 * reaches Ironic. The path is read once (FencedTarget) and forwarded as read. The
 * caller's own headers (X-Auth-Token, microversions) are forwarded and no credential of
 * the bridge is ever added: the path grants nothing Ironic would not grant the caller.
 * Links in Ironic's answers are rewritten to this endpoint as the answer streams through.
 */
export function fencedIronic(context: {
  store: Store;
  catalog: ShardCatalog;
  metrics: BridgeMetrics;
  ironicUrl: string;
  limits?: Partial<FencedLimits>;
}): RawHandler {
  const ironic = new IronicOrigin(context.ironicUrl);
  const limits: FencedLimits = { ...FENCED_LIMITS, ...context.limits };
  const ironicLinks = Buffer.from(ironic.linkBase);
  let inFlight = 0;

  /** A request to Ironic, failed by `signal` (the caller left, the deadline). */
  const send = (
    method: string,
    path: string,
    query: string,
    headers: Record<string, string | string[]>,
    signal: AbortSignal,
  ): { request: ClientRequest; answer: Promise<IncomingMessage> } => {
    const request = ironic.request(method, path, query, headers, signal);
    const answer = new Promise<IncomingMessage>((resolve, reject) => {
      request.once("response", resolve);
      request.once("error", reject);
    });
    return { request, answer };
  };

  /** GET `path` at Ironic with the caller's credentials; its JSON, or IronicAnswered for a 401, 403 or 404. */
  const lookUp = async (
    path: string,
    query: string,
    caller: Record<string, string | string[]>,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>> => {
    const { "content-type": _type, ...headers } = caller;
    const { request, answer } = send(
      "GET",
      path,
      query,
      { ...headers, "x-openstack-ironic-api-version": SHARD_MICROVERSION },
      signal,
    );
    request.end();
    let status: number;
    let answerHeaders: Record<string, string | string[]>;
    let body: Buffer;
    try {
      const got = await answer;
      status = got.statusCode ?? 502;
      answerHeaders = got.headers as Record<string, string | string[]>;
      body = await readSmallAnswer(got, limits.lookupBytes);
    } catch (error) {
      throw signal.aborted ? signal.reason : unreachable(error);
    }
    if (status === 401 || status === 403 || status === 404)
      throw new IronicAnswered({ status, headers: passedOn(answerHeaders, IRONIC_ONLY), body });
    if (status !== 200) throw fenced(`could not read ${path} at Ironic (${status})`);
    try {
      return JSON.parse(body.toString("utf8")) as Record<string, unknown>;
    } catch {
      throw fenced(`Ironic's answer for ${path} is not JSON`);
    }
  };

  /** The node `node` (a name or uuid) is in `shard`: its uuid, or a refusal. */
  const nodeInShard = async (
    node: string,
    shard: string,
    caller: Record<string, string | string[]>,
    signal: AbortSignal,
  ): Promise<string> => {
    const found = await lookUp(`/v1/nodes/${encodeURIComponent(node)}`, "?fields=uuid,shard", caller, signal);
    const nodeShard = found.shard;
    if (nodeShard !== shard)
      throw fenced(
        `node ${node} is in shard ${typeof nodeShard === "string" ? nodeShard : "(none)"}, not ${shard}`,
      );
    if (typeof found.uuid !== "string") throw fenced(`Ironic did not say node ${node}'s uuid`);
    return found.uuid;
  };

  /**
   * A body read here to judge the write (small: see judgedBodyBytes), within the request's
   * deadline: a caller trickling it is cut off there, as a slow Ironic is.
   */
  const judgedBody = async (
    req: IncomingMessage,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<Buffer> => {
    const cut = () => req.destroy();
    signal.addEventListener("abort", cut, { once: true });
    try {
      return joinChunks(await readRequestChunks(req, res, limits.judgedBodyBytes, "any"));
    } catch (error) {
      throw signal.aborted ? signal.reason : error;
    } finally {
      signal.removeEventListener("abort", cut);
    }
  };

  /** A judged body's verdict: what it reads as, or a refusal naming why. */
  const judged = <T>(verdict: Judged<T>): { read: T; bytes: Buffer } => {
    if (!verdict.ok) throw fenced(verdict.reason);
    return verdict;
  };

  /**
   * Refuse unless the write is about a node of `target.shard` and changes nothing of
   * another shard's: answers the path to forward (a node by its uuid) and the body read
   * here to judge it, if one was.
   */
  const judgeWrite = async (
    req: IncomingMessage,
    res: ServerResponse,
    target: FencedTarget,
    subject: WriteSubject,
    caller: Record<string, string | string[]>,
    signal: AbortSignal,
  ): Promise<{ path: string; body: Buffer | null }> => {
    const method = req.method!;
    const { shard, segments } = target;
    switch (subject.kind) {
      case "none":
        throw fenced(
          `${method} ${target.path} is about no node: a shard's holder writes its nodes and what belongs to them`,
        );
      case "node": {
        // A patch may not move the node out of the shard (Ironic: a shard is not to be changed).
        const patch = method === "PATCH" ? judged(judgedPatch(await judgedBody(req, res, signal))) : null;
        if (patch !== null && touching(patch.read, "shard").length > 0)
          throw fenced(`a patch of node ${subject.node} may not change its shard`);
        const uuid = await nodeInShard(subject.node, shard, caller, signal);
        return { path: withNode(segments, uuid), body: patch?.bytes ?? null };
      }
      case "create": {
        const entry = judged(judgedObject(await judgedBody(req, res, signal)));
        const node = entry.read[subject.owned.created];
        if (typeof node !== "string" || node === "")
          throw fenced(
            `a new ${subject.owned.collection} entry must name its node in "${subject.owned.created}", a node of this shard`,
          );
        await nodeInShard(node, shard, caller, signal);
        return { path: target.path, body: entry.bytes };
      }
      case "owned": {
        const patch = method === "PATCH" ? judged(judgedPatch(await judgedBody(req, res, signal))) : null;
        const { collection, stored } = subject.owned;
        // Moved to another node by the patch: that node must be the shard's too. One move,
        // to a node named: each asks Ironic once more.
        const moves = touching(patch?.read ?? [], stored);
        const move = moves[0];
        if (
          moves.length > 1 ||
          (move !== undefined && (move.path !== `/${stored}` || typeof move.value !== "string"))
        )
          throw fenced(`a patch may only move ${collection} ${subject.id} to one other node of this shard`);
        const found = await lookUp(
          `/v1/${collection}/${encodeURIComponent(subject.id)}`,
          `?fields=uuid,${stored}`,
          caller,
          signal,
        );
        const node = found[stored];
        if (typeof node !== "string") throw fenced(`${collection} ${subject.id} belongs to no node`);
        if (typeof found.uuid !== "string")
          throw fenced(`Ironic did not say ${collection} ${subject.id}'s uuid`);
        await nodeInShard(node, shard, caller, signal);
        if (move !== undefined) await nodeInShard(move.value as string, shard, caller, signal);
        // By the uuid the check read: a name cannot be made to mean another entry meanwhile.
        return { path: pathOf(["v1", ...collection.split("/"), found.uuid]), body: patch?.bytes ?? null };
      }
    }
  };

  const forward = async (
    req: IncomingMessage,
    res: ServerResponse,
    target: FencedTarget,
    signal: AbortSignal,
  ): Promise<RawAnswer> => {
    const method = req.method!;
    const caller = passedOn(req.headers, CALLER_ONLY);
    let path = target.path;
    let judged: Buffer | null = null;
    if (MUTATING.has(method)) {
      const subject = writeSubject(method, target.segments);
      const verdict = await judgeWrite(req, res, target, subject, caller, signal);
      path = verdict.path;
      judged = verdict.body;
    }
    const streamed = judged === null && hasBody(req);
    if (streamed && Number(req.headers["content-length"] ?? 0) > limits.bodyBytes)
      throw refused(
        413,
        "shardbridge.body.too_large",
        "Body too large",
        `request body is over the limit of ${limits.bodyBytes} bytes`,
      );
    const headers =
      judged !== null
        ? { ...caller, "content-length": String(judged.length) }
        : streamed && req.headers["content-length"] !== undefined
          ? { ...caller, "content-length": req.headers["content-length"] }
          : caller;
    const { request, answer } = send(method, path, target.query, headers, signal);
    // The body waited in the socket until now: the lease and the write are checked.
    if (streamed) {
      let overLimit: BodyTooLarge | null = null;
      pipeline(req, new ByteLimit(limits.bodyBytes), request, (error) => {
        if (error instanceof BodyTooLarge) overLimit = error;
      });
      answer.catch(() => undefined);
      let got: IncomingMessage;
      try {
        got = await answer;
      } catch (error) {
        if (overLimit !== null)
          throw refused(
            413,
            "shardbridge.body.too_large",
            "Body too large",
            (overLimit as BodyTooLarge).message,
          );
        throw signal.aborted ? signal.reason : unreachable(error);
      }
      return relay(req, target, got);
    }
    request.end(judged ?? undefined);
    try {
      return relay(req, target, await answer);
    } catch (error) {
      throw signal.aborted ? signal.reason : unreachable(error);
    }
  };

  /** Ironic's answer on its way to the caller, links rewritten to this endpoint as the caller reached it. */
  const relay = (req: IncomingMessage, target: FencedTarget, got: IncomingMessage): RawAnswer => {
    const base = `${clientScheme(req)}://${req.headers.host ?? ""}${target.base}`;
    const headers = passedOn(got.headers, IRONIC_ONLY);
    if (typeof headers.location === "string")
      headers.location = headers.location.split(ironic.linkBase).join(base);
    const body = new LinkRewrite(ironicLinks, Buffer.from(base));
    pipeline(got, body, () => undefined);
    return { status: got.statusCode ?? 502, headers, body };
  };

  return rawHandler(FENCED_OPERATIONS, (req, res) => {
    const url = req.url ?? "";
    if (!url.startsWith("/fenced/") || !FORWARDED.includes(req.method ?? "")) return false;
    const parsed = parseFencedUrl(url);
    serveRaw(
      req,
      res,
      ROUTE,
      context.metrics,
      { pathField: "path", logPath: redactSecrets(url.split("?")[0]!) },
      async () => {
        if (!parsed.ok) throw pathRefused(parsed.refusal);
        const deadline = new AbortController();
        const arrived = performance.now();
        let deadlineMs = limits.deadlineMs;
        let timer = setTimeout(() => deadline.abort(timedOut(deadlineMs)), deadlineMs);
        let slotted = false;
        res.once("close", () => {
          if (slotted) inFlight--;
          clearTimeout(timer);
          // The caller left before its answer was out: so does the request to Ironic.
          if (!res.writableFinished) deadline.abort(callerLeft());
        });
        const { target } = parsed;
        const method = req.method!;
        const lease = { shard: target.shard, token: target.token, fenceKey: target.fenceKey };
        const { allowed, current } = await fenceServing(context.store, context.catalog, lease);
        if (!allowed || current === null) {
          // The shard's name is anyone's to write here: labelled only if the store knows it.
          context.metrics.fencedRequests.at(context.metrics.shardLabel(target.shard), "refused").inc();
          throw notTheLease(target.shard);
        }
        const label = context.metrics.knownShardLabel(target.shard);
        // Counted only once the lease is shown: callers without one cost a look at the store
        // each, and cannot keep a holder's requests out.
        if (res.closed) throw callerLeft();
        if (inFlight >= limits.concurrency)
          throw new HttpError(
            [
              {
                status: 503,
                code: "shardbridge.fenced.busy",
                title: "Fenced endpoint busy",
                detail: `${limits.concurrency} requests are in flight through the fenced endpoint: retry`,
              },
            ],
            { "retry-after": "1" },
          );
        inFlight++;
        slotted = true;
        // Invited to send its body only now (see BridgeApp.mayContinue): the lease is shown.
        if (req.headers.expect?.toLowerCase() === "100-continue") res.writeContinue();
        if (MUTATING.has(method)) {
          const margin = await judgeWriteMargin(
            context.store,
            context.catalog,
            lease,
            { current, seenAtMs: arrived },
            deadline.signal,
          );
          if (margin.kind !== "clear") {
            context.metrics.fencedRequests.at(label, "refused").inc();
            if (margin.kind === "gone") throw notTheLease(target.shard);
            throw fenced(
              `the lease of shard ${target.shard} had ${margin.leftMs} ms left, less than the ${margin.marginMs} ms ` +
                "a holder within its renew deadline always has, and was not renewed before it ended: " +
                "the writer is past its own deadline",
            );
          }
          if (margin.waitedMs > 0)
            logger.info("fenced-write-waited", {
              shard: target.shard,
              token: target.token,
              waited_ms: Math.round(margin.waitedMs),
              why: "the lease had less than TTL/3 left: the write waited for its holder's late renew",
            });
          // A write is given no longer than its lease has left: the check and Ironic's
          // apply are two steps, and the margin is what keeps the lease ours in between.
          const { seen } = margin;
          const left = seen.current.ttlMs - (performance.now() - seen.seenAtMs);
          if (left < deadlineMs) {
            clearTimeout(timer);
            deadlineMs = Math.max(1, Math.floor(left));
            timer = setTimeout(() => deadline.abort(timedOut(deadlineMs)), deadlineMs);
          }
        }
        try {
          const answer = await forward(req, res, target, deadline.signal);
          context.metrics.fencedRequests.at(label, "forwarded").inc();
          return answer;
        } catch (error) {
          if (error instanceof IronicAnswered) {
            context.metrics.fencedRequests.at(label, "refused").inc();
            return error.answer;
          }
          context.metrics.fencedRequests.at(label, "refused").inc();
          throw error;
        }
      },
    );
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
