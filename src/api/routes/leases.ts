import { DeclaredRoutes } from "../http/declared-routes.js";
import type { ServerResponse } from "node:http";
import { ShardPath } from "../http/paths.js";
import { z } from "zod";
import { parseOrThrow, ValidationError, type FieldIssue } from "../../core/validation.js";
import type { LeaseOutcome, LeaseView } from "../../core/lease/machine.js";
import type { ShardCatalog } from "../../bridge/shards/catalog.js";
import { mayLease } from "../../bridge/shards/leasable.js";
import type { LeaseWaits, WaitedOutcome } from "../../bridge/shards/lease-waits.js";
import { endRevoked, fenceServing } from "../../bridge/shards/revocation.js";
import type { Admit, Store } from "../../store/store.js";
import {
  assertActsAs,
  assertRole,
  ownsLease,
  principalFrom,
  principalOf,
  seesTokens,
  type Principal,
  type TokenAuthority,
} from "../http/auth.js";
import { asBodyObject, parseJson, readRequestBody } from "../http/body.js";
import { conflict, HttpError } from "../http/errors.js";
import { leaseJson } from "../../bridge/shards/lease-json.js";
import { bodyPolicyOf } from "../http/limits.js";
import { expressPath, urlPattern } from "../http/declared-routes.js";
import type { BridgeMetrics } from "../http/metrics.js";
import { noteWaited, serveRaw, type RawAnswer } from "../http/raw-route.js";
import { rawHandler, type RawHandler } from "../http/mounted-routes.js";
import {
  LEASE_WAIT_MAX_MS,
  LeaseWriteBodies,
  WaitMs,
  type FenceAnswer,
  type LeaseGrant,
  type LeaseState,
} from "../../contracts/leases.js";
import { READ, AS_AGENT, LEASE_HOLDER, declaredRoles, type Operation } from "../openapi/operation.js";

/** The lease routes' operations, as the document lists them (operations.ts) and the role checks read them. */
export const LEASE_OPERATIONS = {
  acquireOrRenewLease: {
    method: "post",
    path: "/v1/shards/{shard}/lease",
    id: "acquireOrRenewLease",
    tag: "leases",
    summary: "Acquire the shard's lease (no token), or renew it under `token`",
    description:
      "Acquire answers a **new** token, also when this agent held the lease (an older process of it is fenced out). Renew keeps the token and restarts the TTL (the shard's, from `shards/NAME.json`; default 6000 ms). Renew every TTL/3; stop acting 2/3 TTL after the last renew sent that succeeded. An acquire with `wait_ms` (at most 30000) that finds the lease held waits: it is answered the moment the lease is released, expires or is taken back — granted to one waiter, the others told who holds it (409 `lease.held`) — or at the end of the wait with a plain acquire's answer; either answer carries `waited_ms`, and a grant's lease began no earlier than `waited_ms` after the request arrived.",
    access: AS_AGENT,
    parameters: ["shard"],
    body: "LeaseAcquireOrRenew",
    answers: {
      200: { description: "granted or renewed", schema: "LeaseGrant" },
      403: {
        description: "the shard's definition does not list this agent",
        codes: ["shard.agent_not_allowed"],
      },
      404: {
        description:
          "acquire only: no definition names the shard and no node carries it (a bridge started with `--allow-undefined-shards` leases any valid name); after a wait too, when its definition went meanwhile",
        codes: ["shard.undefined"],
      },
      409: {
        description:
          "held by another (`lease`, `retry_after_ms`; after a wait, `waited_ms`); the store is recovering (`retry_after_ms`); renew under a token that is not the live one (`stale_token`) or of a lease that is gone (`expired`); acquire only: a shard equal to this one but for case is defined (`case_twin`: one shard to nova and Ironic's database)",
        codes: ["lease.held", "lease.recovering", "lease.stale_token", "lease.expired", "shard.case_twin"],
      },
    },
  },
  releaseLease: {
    method: "delete",
    path: "/v1/shards/{shard}/lease",
    id: "releaseLease",
    tag: "leases",
    summary: "Release the lease held under `token`",
    access: AS_AGENT,
    parameters: ["shard"],
    body: "LeaseRelease",
    answers: {
      204: { description: "released, or nothing was live (a retry is safe)" },
      409: {
        description: "held by another, or under another token",
        codes: ["lease.held", "lease.stale_token"],
      },
    },
  },
  fence: {
    method: "post",
    path: "/v1/shards/{shard}/fence",
    id: "fence",
    tag: "leases",
    summary: "May a write under `token` happen now?",
    access: LEASE_HOLDER,
    parameters: ["shard"],
    body: "FenceQuestion",
    answers: {
      200: {
        description:
          "`allowed`: the token is the shard's live lease and (for an agent) its own; false for any other token, another agent's live one included",
        schema: "FenceAnswer",
      },
    },
  },
  readLease: {
    method: "get",
    path: "/v1/shards/{shard}/lease",
    id: "readLease",
    tag: "leases",
    summary: "The shard's live lease and last token",
    description: "Tokens are null but for admin.",
    access: READ,
    parameters: ["shard"],
    answers: { 200: { description: "the live lease, or null", schema: "LeaseState" } },
  },
} satisfies Record<string, Operation>;

const fieldsOf = (body: z.ZodObject): ReadonlySet<string> => new Set(Object.keys(body.shape));
const ACQUIRE_FIELDS = fieldsOf(LeaseWriteBodies.acquire);
const RELEASE_FIELDS = fieldsOf(LeaseWriteBodies.release);
const FENCE_FIELDS = fieldsOf(LeaseWriteBodies.fence);

/**
 * A lease write's body. Its values are the Store's to check (its parse is the request's
 * one validation); here only which fields an agent may send: the shard and the TTL are
 * never the caller's. A field it may not send is reported together with whatever the
 * Store's parse refuses, in one answer, and nothing is written.
 */
class LeaseBody {
  readonly fields: Record<string, unknown>;
  private readonly unknown: FieldIssue[];

  constructor(rawBody: unknown, allowed: ReadonlySet<string>) {
    this.fields = asBodyObject(rawBody);
    this.unknown = Object.keys(this.fields)
      .filter((key) => !allowed.has(key))
      .map((field) => ({
        field,
        reason: `is not a field of this request (send ${[...allowed].join(", ")})`,
      }));
  }

  /** Run the Store write `call`, which hands `admit` (the route's own check) to the Store. */
  async write<T, I>(call: (admit: Admit<I>) => Promise<T>, admit: Admit<I> = () => undefined): Promise<T> {
    if (this.unknown.length === 0) return call(admit);
    // Refused in any case; the Store's parse runs first so that its findings join ours.
    const refused = new ValidationError(this.unknown);
    try {
      return await call(() => {
        throw refused;
      });
    } catch (error) {
      if (error instanceof ValidationError && error !== refused)
        throw new ValidationError([...this.unknown, ...error.issues], error.unlisted);
      throw error;
    }
  }
}

/** 409 naming the live holder and its time left, or why no lease can be had now. */
function refusal(
  shard: string,
  reason: string | undefined,
  current: LeaseView | null,
  showToken: boolean,
  retryAfterMs?: number,
  waitedMs?: number,
): HttpError {
  const detail =
    current !== null
      ? `shard ${shard} is held by ${current.holder} for ${current.ttlMs} ms more`
      : reason === "recovering"
        ? `the store started empty less than one lease TTL ago and has no history of shard ${shard}; ` +
          `a holder it forgot may still be acting, retry in ${retryAfterMs ?? 0} ms`
        : `shard ${shard} has no live lease for this agent`;
  return new HttpError([
    conflict(`lease.${reason ?? "held"}`, "Lease not granted", detail, {
      lease: current && leaseJson(current, showToken),
      retry_after_ms: current !== null ? current.ttlMs : (retryAfterMs ?? 0),
      ...(waitedMs !== undefined && { waited_ms: waitedMs }),
    }),
  ]);
}

function notAllowed(shard: string, agent: string): HttpError {
  return new HttpError([
    {
      status: 403,
      code: "shardbridge.shard.agent_not_allowed",
      title: "Agent may not serve this shard",
      detail: `agent ${agent} is not among the agents allowed to serve shard ${shard} (shards/${shard}.json)`,
    },
  ]);
}

function undefinedShard(shard: string): HttpError {
  return new HttpError([
    {
      status: 404,
      code: "shardbridge.shard.undefined",
      title: "Shard not defined",
      detail:
        `shard ${shard} is not defined (shards/${shard}.json or PUT /v1/shard-definitions/${shard}) ` +
        `and no node carries it as its shard key; a bridge started with --allow-undefined-shards leases any name`,
    },
  ]);
}

interface LeaseContext {
  store: Store;
  catalog: ShardCatalog;
  metrics: BridgeMetrics;
  waits: LeaseWaits;
}

/** `wait_ms` of an acquire's body: 0 when absent; refused with a renew (the field names why). */
function waitOf(waitMs: unknown, token: unknown): number {
  if (waitMs === undefined) return 0;
  const parsed = WaitMs.safeParse(waitMs);
  const reason = !parsed.success
    ? `must be a whole number of milliseconds from 0 to ${LEASE_WAIT_MAX_MS}`
    : token !== undefined
      ? "only an acquire (no token) waits"
      : null;
  if (reason !== null) throw new ValidationError([{ field: "wait_ms", reason }]);
  return parsed.data!;
}

/** Aborted when the client goes away before its answer: a waiting acquire then leaves. */
function goneSignal(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  // A response emits 'close' after every answer too; by then the wait is over, and an
  // abort would only build a DOMException (with its stack) for each answered wait.
  res.once("close", () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone.signal;
}

/** POST /v1/shards/{shard}/lease: acquire (no token) or renew (under `token`). */
async function acquireOrRenew(
  { store, catalog, metrics, waits }: LeaseContext,
  principal: Principal,
  shard: string,
  rawBody: unknown,
  res: ServerResponse,
): Promise<RawAnswer> {
  const body = new LeaseBody(rawBody, ACQUIRE_FIELDS);
  const { agent, token } = body.fields;
  const waitMs = waitOf(body.fields.wait_ms, token);
  // Checked on the parsed request, before the store is touched.
  let revoked = false;
  const admit = (input: { shard: string; agent: string }) => {
    assertActsAs(principal, input.agent);
    if (!catalog.mayServe(input.shard, input.agent)) {
      revoked = true;
      throw notAllowed(input.shard, input.agent);
    }
  };
  const request = { shard, agent: agent as string, ttlMs: catalog.ttlMsFor(shard) };
  let outcome: LeaseOutcome;
  if (token === undefined) {
    // Asked again before each acquire a wait makes: a definition may go meanwhile.
    const leasable = async () => {
      if (!(await mayLease(catalog, store.nodes, shard))) throw undefinedShard(shard);
    };
    await leasable();
    outcome = await body.write(
      (admitted): Promise<LeaseOutcome> =>
        waitMs > 0
          ? waits.acquire(request, admitted, waitMs, goneSignal(res), leasable)
          : store.acquire(request, admitted),
      admit,
    );
    // A grant, or a refusal naming a live lease: the store holds the shard's lease state.
    const label =
      outcome.ok || outcome.current !== null ? metrics.knownShardLabel(shard) : metrics.shardLabel(shard);
    if (outcome.ok) metrics.leaseAcquired.at(label).inc();
    else metrics.leaseRefused.at(label, outcome.reason).inc();
  } else {
    const started = performance.now();
    try {
      outcome = await body.write(
        // The token first: a literal that starts with a spread and adds to it gets a hidden
        // class of its own per object on Node 20's V8 (see docs/ARCHITECTURE.md, One event loop).
        (admitted) => store.renew({ token: token as number, ...request }, admitted),
        admit,
      );
    } catch (error) {
      // A holder taken off the shard's definition: its renew is refused and its lease
      // ended with it, so a standby the definition names is granted at once.
      if (revoked) await endRevoked(store, shard, { holder: agent as string, token: token as number });
      throw error;
    }
    metrics.renewSeconds.observe((performance.now() - started) / 1000);
    if (!outcome.ok) {
      const label = outcome.current !== null ? metrics.knownShardLabel(shard) : metrics.shardLabel(shard);
      metrics.leaseLost.at(label, outcome.reason).inc();
    }
  }
  const waitedMs = waitMs > 0 ? (outcome as WaitedOutcome).waitedMs : undefined;
  if (waitedMs !== undefined) noteWaited(res, waitedMs);
  if (!outcome.ok)
    throw refusal(
      shard,
      outcome.reason,
      outcome.current,
      seesTokens(principal),
      outcome.retryAfterMs,
      waitedMs,
    );
  const grant: LeaseGrant = { shard, holder: outcome.holder, token: outcome.token, ttl_ms: outcome.ttlMs };
  if (outcome.fenceKey !== undefined) grant.fence_key = outcome.fenceKey;
  if (waitedMs !== undefined) grant.waited_ms = waitedMs;
  return { status: 200, body: grant };
}

/** DELETE /v1/shards/{shard}/lease: release. */
async function release(
  { store }: LeaseContext,
  principal: Principal,
  shard: string,
  rawBody: unknown,
): Promise<RawAnswer> {
  const body = new LeaseBody(rawBody, RELEASE_FIELDS);
  const { agent, token } = body.fields;
  const outcome = await body.write(
    (admitted) => store.release({ shard, agent: agent as string, token: token as number }, admitted),
    (input: { agent: string }) => assertActsAs(principal, input.agent),
  );
  if (!outcome.ok) throw refusal(shard, outcome.reason, outcome.current, seesTokens(principal));
  return { status: 204 };
}

/** POST /v1/shards/{shard}/fence: may a write under `token` happen now? */
async function fence(
  { store, catalog }: LeaseContext,
  principal: Principal,
  shard: string,
  rawBody: unknown,
): Promise<RawAnswer> {
  const body = new LeaseBody(rawBody, FENCE_FIELDS);
  const outcome = await body.write((admitted) =>
    fenceServing(store, catalog, { shard, token: body.fields.token as number }, admitted),
  );
  // Another agent's live token does not pass either, and is answered alike (see ownsLease).
  const allowed = outcome.allowed && ownsLease(principal, outcome.current);
  return { status: 200, body: { allowed } satisfies FenceAnswer };
}

/**
 * The lease writes: each operation (its method and route, also the label it is counted
 * under; the roles the route checks; its body's limit), and its handler.
 */
const WRITES = [
  { operation: LEASE_OPERATIONS.acquireOrRenewLease, handle: acquireOrRenew },
  { operation: LEASE_OPERATIONS.releaseLease, handle: release },
  { operation: LEASE_OPERATIONS.fence, handle: fence },
  // One literal, not a spread: every renew reads these, and all three keep one hidden class.
].map(({ operation, handle }) => ({
  method: operation.method.toUpperCase(),
  path: expressPath(operation.path),
  url: urlPattern(operation.path),
  operation,
  roles: declaredRoles(operation),
  limit: bodyPolicyOf(operation).limit,
  handle,
}));

/**
 * The lease writes agents make every TTL/3 per shard — acquire, renew, release, fence —
 * served straight on node:http, ahead of express: express's own per-request work alone
 * costs about five times a bare node:http answer here (measured: 3.1k against 17.5k
 * answers/s, one route, the same load), and every renew of every shard pays it. The
 * same steps as express's pipeline, from the same functions: request id, bearer token,
 * role, bounded body, validation, the API-SIG error shape, metrics and the request log.
 * Answers whether it took the request; everything else goes to express.
 */
export function leaseWrites(context: LeaseContext & { authority: TokenAuthority }): RawHandler {
  return rawHandler(
    WRITES.map((write) => write.operation),
    (req, res) => {
      const url = req.url ?? "";
      for (const write of WRITES) {
        if (req.method !== write.method) continue;
        const match = write.url.exec(url);
        if (match === null) continue;
        serveRaw(req, res, write.path, context.metrics, { pathField: "shard" }, async () => {
          const principal = principalFrom(context.authority, req.headers.authorization);
          assertRole(principal, write.roles);
          const body = parseJson(await readRequestBody(req, res, write.limit));
          return write.handle(context, principal, decodeURIComponent(match[1]!), body, res);
        });
        return true;
      }
      return false;
    },
  );
}

/**
 * The lease read, in express with the other reads (the writes: see leaseWrites):
 *   GET /v1/shards/{shard}/lease -> 200 the live lease or null
 * The contract nova-compute codes against, writes included:
 *   POST   /v1/shards/{shard}/lease  {"agent"}          acquire: a new lease, new token -> 200 | 403 | 409
 *                                     {"agent","token"}  renew under that token         -> 200 | 403 | 409
 *   DELETE /v1/shards/{shard}/lease  {"agent","token"}  release                        -> 204 | 409
 *   POST   /v1/shards/{shard}/fence  {"token"}          -> 200 {"allowed"} (false for another agent's lease)
 * The TTL is the shard's (shards/NAME.json), never the caller's.
 */
export function leaseRoutes(store: Store): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(LEASE_OPERATIONS.readLease, async (req, res) => {
    const { shard } = parseOrThrow(ShardPath, req.params);
    const { current, lastToken } = await store.read(shard);
    const showToken = seesTokens(principalOf(res));
    res.json({
      shard,
      lease: current && leaseJson(current, showToken),
      last_token: showToken ? lastToken : null,
    } satisfies LeaseState);
  });

  return routes;
}
