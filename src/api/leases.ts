import { Router } from "express";
import { z } from "zod";
import { FencingToken } from "../domain/lease.js";
import { AgentId, ShardName } from "../domain/names.js";
import { parseBoth, parseOrThrow } from "../domain/validation.js";
import type { LeaseView } from "../lease/machine.js";
import type { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { assertActsAs, assertOwnLease, requireRole, seesTokens } from "./auth.js";
import { bodyObject } from "./body.js";
import { HttpError } from "./errors.js";
import type { BridgeMetrics } from "./metrics.js";

const ShardPath = z.strictObject({ shard: ShardName });
const AcquireBody = z.strictObject({ agent: AgentId, token: FencingToken.optional() });
const ReleaseBody = z.strictObject({ agent: AgentId, token: FencingToken });
const FenceBody = z.strictObject({ token: FencingToken });

/** 409 naming the live holder and its time left, or why no lease can be had now. */
function refusal(
  shard: string,
  reason: string | undefined,
  current: LeaseView | null,
  showToken: boolean,
  retryAfterMs?: number,
): HttpError {
  const detail =
    current !== null
      ? `shard ${shard} is held by ${current.holder} for ${current.ttlMs} ms more`
      : reason === "recovering"
        ? `the store started empty less than one lease TTL ago and has no history of shard ${shard}; ` +
          `a holder it forgot may still be acting, retry in ${retryAfterMs ?? 0} ms`
        : `shard ${shard} has no live lease for this agent`;
  return new HttpError([
    {
      status: 409,
      code: `shardbridge.lease.${reason ?? "held"}`,
      title: "Lease not granted",
      detail,
      lease: current && leaseJson(current, showToken),
      retry_after_ms: current !== null ? current.ttlMs : (retryAfterMs ?? 0),
    },
  ]);
}

/**
 * A live lease as the API shows it. The token only where `showToken` (an operator's view,
 * or the holder's own lease): a token is what lets writes pass the fence, and an older
 * process of the same agent id must never learn its successor's from a read or a refusal.
 */
export function leaseJson(
  view: LeaseView,
  showToken: boolean,
): { holder: string; token: number | null; ttl_ms: number; since: string } {
  return {
    holder: view.holder,
    token: showToken ? view.token : null,
    ttl_ms: view.ttlMs,
    since: new Date(Math.floor(view.sinceUs / 1000)).toISOString(),
  };
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

/**
 * Lease routes, the contract nova-compute codes against:
 *   POST   /v1/shards/{shard}/lease  {"agent"}          acquire: a new lease, new token -> 200 | 403 | 409
 *                                     {"agent","token"}  renew under that token         -> 200 | 403 | 409
 *   DELETE /v1/shards/{shard}/lease  {"agent","token"}  release                        -> 204 | 409
 *   POST   /v1/shards/{shard}/fence  {"token"}          -> 200 {"allowed"} | 403 (another agent's lease)
 *   GET    /v1/shards/{shard}/lease                     -> 200 the live lease or null
 * The TTL is the shard's (shards/NAME.json), never the caller's.
 */
export function leaseRoutes(store: Store, catalog: ShardCatalog, metrics: BridgeMetrics): Router {
  const router = Router();

  router.post("/v1/shards/:shard/lease", requireRole("agent", "admin"), async (req, res) => {
    const [{ shard }, body] = parseBoth([ShardPath, req.params], [AcquireBody, bodyObject(req)]);
    assertActsAs(res, body.agent);
    if (!catalog.mayServe(shard, body.agent)) throw notAllowed(shard, body.agent);
    const request = { shard, agent: body.agent, ttlMs: catalog.ttlMsFor(shard) };
    let outcome;
    if (body.token === undefined) {
      outcome = await store.acquire(request);
      const label = metrics.shardLabel(shard);
      if (outcome.ok) metrics.leaseAcquired.inc({ shard: label });
      else metrics.leaseRefused.inc({ shard: label, reason: outcome.reason });
    } else {
      const stop = metrics.renewSeconds.startTimer();
      outcome = await store.renew({ ...request, token: body.token });
      stop();
      if (!outcome.ok) metrics.leaseLost.inc({ shard: metrics.shardLabel(shard), reason: outcome.reason });
    }
    if (!outcome.ok)
      throw refusal(shard, outcome.reason, outcome.current, seesTokens(res), outcome.retryAfterMs);
    res.json({ shard, holder: outcome.holder, token: outcome.token, ttl_ms: outcome.ttlMs });
  });

  router.delete("/v1/shards/:shard/lease", requireRole("agent", "admin"), async (req, res) => {
    const [{ shard }, body] = parseBoth([ShardPath, req.params], [ReleaseBody, bodyObject(req)]);
    assertActsAs(res, body.agent);
    const outcome = await store.release({ shard, agent: body.agent, token: body.token });
    if (!outcome.ok) throw refusal(shard, outcome.reason, outcome.current, seesTokens(res));
    res.status(204).end();
  });

  router.post("/v1/shards/:shard/fence", requireRole("agent", "admin"), async (req, res) => {
    const [{ shard }, body] = parseBoth([ShardPath, req.params], [FenceBody, bodyObject(req)]);
    const outcome = await store.fence({ shard, token: body.token });
    // Another agent's live token is refused as the feed refuses it (an agent acts as itself
    // only); any other token just does not pass, which tells nothing GET lease does not.
    if (outcome.allowed) assertOwnLease(res, shard, outcome.current);
    res.json({ allowed: outcome.allowed });
  });

  router.get("/v1/shards/:shard/lease", async (req, res) => {
    const { shard } = parseOrThrow(ShardPath, req.params);
    const { current, lastToken } = await store.read(shard);
    const showToken = seesTokens(res);
    res.json({
      shard,
      lease: current && leaseJson(current, showToken),
      last_token: showToken ? lastToken : null,
    });
  });

  return router;
}
