import { urlPattern } from "../http/declared-routes.js";
import { DeclaredRoutes } from "../http/declared-routes.js";
import { timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { z } from "zod";
import { NodePath } from "../../core/node.js";
import { parseOrThrow } from "../../core/validation.js";
import { decodeFailure } from "../decode/failure.js";
import type { DecodePool } from "../decode/decode-pool.js";
import { INSPECTOR, type FinalOutcome, type TraitService } from "../../bridge/trait-service.js";
import type { ApiError } from "../http/errors.js";
import { conflict, HttpError, nodeNotFound } from "../http/errors.js";
import { assertRole, principalFrom, principalOf, type TokenAuthority } from "../http/auth.js";
import { logger } from "../../runtime/log.js";
import { bodyObject, readRequestChunks } from "../http/body.js";
import type { BridgeMetrics } from "../http/metrics.js";
import { serveRaw, type RawAnswer } from "../http/raw-route.js";
import { rawHandler, type RawHandler } from "../http/mounted-routes.js";
import {
  SIGNATURE_HEADERS,
  SIGNATURE_WINDOW_S,
  webhookSignature,
} from "../../contracts/webhook-signature.js";

import { bodyPolicyOf, WEBHOOK_BODY } from "../http/limits.js";
import {
  TraitResetBody,
  type NodeTraits,
  type TraitsApplied,
  type TraitsReset,
} from "../../contracts/traits.js";
import { READ, ADMIN, NO_NODE, declaredRoles, type Operation } from "../openapi/operation.js";

/** How long a delivery id is remembered, so a retried delivery gets its first answer. */
const DELIVERY_MEMORY_S = 24 * 3600;

export const DeliveryId = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,128}$/, { error: "must be 1..128 of A-Z a-z 0-9 . _ : -" });
/**
 * Built once: zod compiles a schema on its first parse, which costs far more than the
 * parse (built per request, this one took a fifth of a webhook delivery's CPU).
 */
const DeliveryHeader = z.strictObject({ delivery: DeliveryId });

function unauthorized(code: string, detail: string): HttpError {
  return new HttpError([
    { status: 401, code: `shardbridge.inspector.${code}`, title: "Webhook not authenticated", detail },
  ]);
}

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** Checks the delivery's signature and timestamp; answers the signature's hex. */
function verify(
  headers: IncomingHttpHeaders,
  rawBody: readonly Buffer[],
  secret: string,
  nowS: number,
): string {
  const timestamp = header(headers, SIGNATURE_HEADERS.timestamp);
  const signature = header(headers, SIGNATURE_HEADERS.signature);
  if (timestamp === undefined || signature === undefined) {
    throw unauthorized("unsigned", "send X-Shardbridge-Timestamp and X-Shardbridge-Signature: sha256=<hex>");
  }
  const hex = webhookSignature(secret, timestamp, header(headers, SIGNATURE_HEADERS.delivery), rawBody);
  const expected = Buffer.from(`sha256=${hex}`);
  const presented = Buffer.from(signature);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) {
    throw unauthorized(
      "bad_signature",
      "the signature does not match: HMAC-SHA256 over <timestamp>\\n<delivery id>\\n<raw body>",
    );
  }
  const at = Number(timestamp);
  if (!Number.isInteger(at) || Math.abs(nowS - at) > SIGNATURE_WINDOW_S) {
    throw unauthorized(
      "stale_timestamp",
      `the timestamp is not within ${SIGNATURE_WINDOW_S} s of now (a replay?)`,
    );
  }
  return hex;
}

/** A delivery's first answer, as remembered, given again. */
function replay(remembered: string): RawAnswer {
  const first = JSON.parse(remembered) as { status: number; body: unknown };
  return { status: first.status, headers: { "x-shardbridge-replay": "true" }, body: first.body };
}

/** The answer for an outcome: status and body. */
function answerOf(outcome: FinalOutcome): { status: number; body: unknown } {
  switch (outcome.kind) {
    case "applied":
      return {
        status: 200,
        body: {
          node: outcome.node,
          generation: outcome.generation,
          applied: outcome.applied,
        } satisfies TraitsApplied,
      };
    case "unknown_node":
      return answerWith([nodeNotFound(outcome.node)]);
    case "stale":
      return answerWith([
        conflict(
          "traits.stale",
          "Older than what was applied",
          `order ${outcome.order} is not after ${outcome.lastOrder}, already applied for node ${outcome.node}`,
        ),
      ]);
    case "refused":
      return answerWith(
        outcome.problems.map((p) => ({
          status: 422,
          code: p.owner !== undefined ? "shardbridge.traits.not_owned" : "shardbridge.traits.refused",
          title: "Trait change refused",
          detail:
            p.owner === undefined
              ? `${p.trait}: ${p.reason}`
              : `${p.trait}: ${p.reason}; inspection changes its own traits and unclaimed ones, ` +
                `${p.owner}'s are set where ${p.owner} works (see serve --ownership)`,
          field: p.trait,
        })),
      );
  }
}

function answerWith(errors: ApiError[]): { status: number; body: unknown } {
  return { status: errors[0]!.status, body: { errors } };
}

export interface WebhookContext {
  service: TraitService;
  decoder: DecodePool;
  secret: string | undefined;
  metrics: BridgeMetrics;
  authority: TokenAuthority;
  nowS?: () => number;
}

/** The trait routes' operations (a node's traits, their reset, the inspector's webhook), as the document lists them (operations.ts) and the role checks read them. */
export const TRAIT_OPERATIONS = {
  getNodeTraits: {
    method: "get",
    path: "/v1/nodes/{uuid}/traits",
    id: "getNodeTraits",
    tag: "traits",
    summary: "A node's traits and who holds each",
    access: READ,
    parameters: ["uuid"],
    answers: {
      200: { description: "the traits", schema: "NodeTraits" },
      404: NO_NODE,
    },
  },
  resetNodeTraits: {
    method: "post",
    path: "/v1/nodes/{uuid}/traits/reset",
    id: "resetNodeTraits",
    tag: "traits",
    summary: "Forget a node's inspection orders and/or remove every trait it holds (an operator's repair)",
    description:
      "`order`: each source's next result applies whatever its order (a node whose inspections are refused as stale). `traits`: every trait the node holds is removed, whoever holds it, as one change that reaches the shard's feed and Ironic. Logged as `node-traits-reset` (role, address, request id).",
    access: ADMIN,
    parameters: ["uuid"],
    body: "TraitReset",
    answers: {
      200: {
        description: "reset: the removals committed and the orders forgotten, per source",
        schema: "TraitsReset",
      },
      404: NO_NODE,
    },
  },
  inspectorWebhook: {
    method: "post",
    path: "/v1/inspector/webhook",
    id: "inspectorWebhook",
    tag: "traits",
    summary: "An inspection result, or explicit trait deltas, for one node (signed)",
    description:
      "A repeated `X-Shardbridge-Delivery` id of a delivery that was applied gets the first answer again with `X-Shardbridge-Replay: true`, and nothing is applied twice. Refusals (404, 409, 422) change nothing and are not remembered: sent again, a delivery is judged again.",
    access: { kind: "webhook", roles: ["inspector"] },
    bodyPolicy: WEBHOOK_BODY,
    body: "WebhookPayload",
    answers: {
      200: { description: "applied: the additions and removals", schema: "TraitsApplied" },
      401: {
        description: "unsigned, a signature that does not match, or a timestamp outside ±300 s",
        codes: ["inspector.unsigned", "inspector.bad_signature", "inspector.stale_timestamp"],
      },
      404: NO_NODE,
      409: { description: "not after the last order applied for the node", codes: ["traits.stale"] },
      422: {
        description:
          "a trait another owns (`field`: the trait), or a change refused (`+X` with `-X`, over 50 traits)",
        codes: ["traits.not_owned", "traits.refused"],
      },
      503: { description: "the bridge has no webhook secret", codes: ["inspector.not_configured"] },
    },
  },
} satisfies Record<string, Operation>;

/**
 * POST /v1/inspector/webhook (inspector role), signed: HMAC-SHA256 over the timestamp,
 * the delivery id and the raw body with the shared secret. A delivery id applied before (a
 * signed request without one: the same signature) gets its first answer again and
 * nothing is applied twice; a refused one is remembered by nothing. Two kinds of payload: an inspection result
 * (turned into deltas by the trait rules) or explicit deltas.
 *
 * Served on node:http ahead of express, like the lease writes (see leaseWrites): express's
 * routing and middleware cost about a third of a delivery here, and the inspector sends
 * one per node. Answers whether it took the request.
 */
export function webhookRoute(context: WebhookContext): RawHandler {
  const operation = TRAIT_OPERATIONS.inspectorWebhook;
  const roles = declaredRoles(operation);
  const limit = bodyPolicyOf(operation).limit;
  const url = urlPattern(operation.path);
  return rawHandler([operation], (req, res) => {
    if (req.method !== "POST" || !url.test(req.url ?? "")) return false;
    serveRaw(req, res, operation.path, context.metrics, { pathField: "(path)" }, async () => {
      // Authenticated before a byte of the body is read.
      const principal = principalFrom(context.authority, req.headers.authorization);
      assertRole(principal, roles);
      const rawBody = await readRequestChunks(req, res, limit);
      return webhook(context, req.headers, rawBody);
    });
    return true;
  });
}

async function webhook(
  { service, decoder, secret, nowS = () => Date.now() / 1000 }: WebhookContext,
  headers: IncomingHttpHeaders,
  rawBody: readonly Buffer[],
): Promise<RawAnswer> {
  if (secret === undefined) {
    throw new HttpError([
      {
        status: 503,
        code: "shardbridge.inspector.not_configured",
        title: "Webhook not configured",
        detail: "start the bridge with --inspector-secret (or SHARDBRIDGE_INSPECTOR_SECRET)",
      },
    ]);
  }
  const receivedS = nowS();
  const signature = verify(headers, rawBody, secret, receivedS);
  const delivery = header(headers, SIGNATURE_HEADERS.delivery);
  // Remembered by its id, or — without one — by its signature, so the very same signed
  // request sent again inside the window is answered as a replay, never applied twice.
  // ("~" is no character of a delivery id: the two never meet.)
  const deliveryId =
    delivery === undefined ? `~sig.${signature}` : parseOrThrow(DeliveryHeader, { delivery }).delivery;
  const memoryS = delivery === undefined ? 2 * SIGNATURE_WINDOW_S : DELIVERY_MEMORY_S;
  // Decoded off the event loop when large. Whether the delivery was seen before is asked
  // with the node's first read (the change below), in the same round trip to the store;
  // only a body that does not decode needs its own lookup: a retry of a delivery that
  // was applied still gets its first answer.
  const decoded = await decoder.decode({ kind: "webhook", nowS: receivedS }, rawBody);
  if (!decoded.ok) {
    const seen = await service.delivery(deliveryId);
    if (seen !== null) return replay(seen);
    throw decodeFailure(decoded);
  }
  const request = decoded.value;
  const memory = {
    id: deliveryId,
    ttlSeconds: memoryS,
    answerOf: (o: FinalOutcome) => JSON.stringify(answerOf(o)),
  };
  const outcome =
    request.kind === "inspection"
      ? await service.applyInspection(request.node, request.order, request.desired, memory)
      : await service.applyExplicit(request.node, INSPECTOR, request.order, request.deltas, memory);
  return outcome.kind === "replayed" ? replay(outcome.answer) : answerOf(outcome);
}

/**
 * GET  /v1/nodes/{uuid}/traits: the node's traits, who holds each, and the generation.
 * POST /v1/nodes/{uuid}/traits/reset (admin): the operator's repair of a node whose
 *      inspections are refused as stale (an order from a broken inspector) or whose traits
 *      must start afresh; logged as `node-traits-reset`.
 */
export function traitRoutes(service: TraitService): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(TRAIT_OPERATIONS.getNodeTraits, async (req, res) => {
    const { uuid } = parseOrThrow(NodePath, req.params);
    const record = await service.traitsOf(uuid);
    if (record === null) throw new HttpError([nodeNotFound(uuid)]);
    const traits = Object.entries(record.holders)
      .map(([name, owner]) => ({ name, owner }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    res.json({ node: uuid, generation: record.generation, traits } satisfies NodeTraits);
  });

  routes.serve(TRAIT_OPERATIONS.resetNodeTraits, async (req, res) => {
    const { uuid } = parseOrThrow(NodePath, req.params);
    const what = parseOrThrow(TraitResetBody, bodyObject(req));
    const outcome = await service.reset(uuid, what);
    if (outcome.kind === "unknown_node") throw new HttpError([nodeNotFound(uuid)]);
    const { node, generation, applied, forgotten } = outcome;
    // The audit record: who (the admin role, from where, under which request id) reset what.
    logger.warn("node-traits-reset", {
      node,
      order: what.order,
      traits: what.traits,
      removed: applied,
      forgotten_orders: forgotten,
      generation,
      role: principalOf(res).role,
      remote: req.socket.remoteAddress,
      request_id: res.locals.requestId,
    });
    res.json({ node, generation, applied, forgotten } satisfies TraitsReset);
  });

  return routes;
}
