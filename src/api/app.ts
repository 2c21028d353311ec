import { randomUUID } from "node:crypto";
import express, { type Express } from "express";
import { logger, requestContext } from "../log.js";
import { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { agentRoutes, legacyPoolLoader } from "./agents.js";
import { LegacyAssignments } from "../ring/assignment.js";
import { LegacyPool, type LegacyPoolOptions } from "../ring/pool.js";
import { SERVICE_DOWN_TIME_MS } from "../ring/membership.js";
import { authenticate, type TokenAuthority } from "./auth.js";
import { readBody, parseJsonBody } from "./body.js";
import { DecodePool } from "./decode/pool.js";
import { HttpError, errorHandler } from "./errors.js";
import type { IronicOutbox } from "../ironic/outbox.js";
import { OwnershipRegistry } from "../traits/ownership.js";
import type { TraitRule } from "../traits/inspection.js";
import { TraitService } from "../traits/service.js";
import { feedRoutes } from "./feed.js";
import { inspectorRoutes } from "./inspector.js";
import { leaseRoutes } from "./leases.js";
import { bodyPolicy } from "./limits.js";
import { BridgeMetrics } from "./metrics.js";
import { nodeRoutes } from "./nodes.js";
import { shardRoutes } from "./shards.js";

/** Free unsharded nodes read per store call while nova's ring share is computed. */
const FREE_PAGE = 1000;

/**
 * The caller's X-Request-Id when it is a sane one (it lands in every log line and is
 * echoed back), else a fresh one.
 */
function requestIdOf(presented: string | undefined): string {
  return presented !== undefined && /^[\x21-\x7e]{1,128}$/.test(presented) ? presented : randomUUID();
}

export interface AppOptions {
  authority: TokenAuthority;
  catalog?: ShardCatalog;
  /** trait rules, ownership and the webhook secret; defaults: no rules, compute's ownership, no secret */
  inspector?: { rules: TraitRule[]; ownership: OwnershipRegistry; secret?: string | undefined };
  /** where applied trait changes go in Ironic, if anywhere */
  ironic?: IronicOutbox;
  /** the legacy ring pool: ring kind, rebuild period, service down time, clock */
  legacy?: LegacyPoolOptions & { serviceDownMs?: number };
}

export function createApp(
  store: Store,
  {
    authority,
    catalog = new ShardCatalog(),
    inspector = { rules: [], ownership: new OwnershipRegistry() },
    ironic,
    legacy = {},
  }: AppOptions,
): Express {
  const app = express();
  app.disable("x-powered-by");
  const metrics = new BridgeMetrics(store);
  app.use(metrics.middleware());
  app.use((req, res, next) => {
    const requestId = requestIdOf(req.get("x-request-id"));
    res.set("x-request-id", requestId);
    const started = performance.now();
    res.on("finish", () =>
      logger.info("request", {
        request_id: requestId,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        ms: Math.round((performance.now() - started) * 10) / 10,
      }),
    );
    requestContext.run({ requestId }, next);
  });
  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.get("/readyz", async (_req, res) => {
    try {
      await store.ping();
      res.json({ status: "ready", store: store.kind });
    } catch (error) {
      res.status(503).json({ status: "store unreachable", store: store.kind, error: String(error) });
    }
  });
  app.use(metrics.routes());
  // Everything below needs a bearer token; health checks and metrics above do not.
  // Authenticate first: nobody without a token makes the bridge read a body.
  app.use(authenticate(authority));
  app.use(readBody((req) => bodyPolicy(req.path).limit));
  app.use((req, res, next) => (bodyPolicy(req.path).parseHere ? parseJsonBody(req, res, next) : next()));
  app.use(leaseRoutes(store, catalog, metrics));
  app.use(shardRoutes(store, catalog));
  const traits = new TraitService(store.traits, store.nodes, inspector.ownership, (node, deltas) =>
    ironic?.push(node, deltas),
  );
  // Large bodies (a bulk, an inspection result) are decoded off the event loop.
  const decoder = new DecodePool(inspector.rules);
  app.use(nodeRoutes(store.nodes, traits, decoder));
  const serviceDownMs = legacy.serviceDownMs ?? SERVICE_DOWN_TIME_MS;
  const pool = new LegacyPool(legacyPoolLoader(store, catalog, serviceDownMs), legacy);
  const assignments = new LegacyAssignments({
    pages: async function* () {
      for await (const page of store.nodes.pages({ kind: "free" }, FREE_PAGE)) yield page.map((n) => n.uuid);
    },
    version: () => store.nodes.poolVersion(),
  });
  app.use(agentRoutes(store, catalog, pool, assignments, serviceDownMs));
  app.use(inspectorRoutes(traits, decoder, inspector.secret));
  app.use(feedRoutes(store, traits));
  app.use((req) => {
    throw new HttpError([
      {
        status: 404,
        code: "shardbridge.route.not_found",
        title: "No such route",
        detail: `${req.method} ${req.path}`,
      },
    ]);
  });
  app.use(errorHandler((message, meta) => logger.error(message, meta)));
  return app;
}
