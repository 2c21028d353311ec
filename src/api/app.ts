import type { IncomingMessage, ServerResponse } from "node:http";
import express from "express";
import { logger } from "../log.js";
import { logRequest, requestIdOf } from "./request-log.js";
import { ShardCatalog } from "../shards/definitions.js";
import { StoredDefinitions } from "../shards/stored-definitions.js";
import { definitionRoutes } from "./definitions.js";
import type { Store } from "../store/store.js";
import { agentRoutes } from "./agents.js";
import { legacyPoolLoader } from "../shards/queries.js";
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
import { ironicDeliveryRoutes } from "./ironic-delivery.js";
import { traitRoutes, webhookRoute } from "./inspector.js";
import { fencedIronic } from "./fenced-ironic.js";
import { leaseRoutes, leaseWrites } from "./leases.js";
import { bodyPolicy } from "./limits.js";
import { BridgeMetrics } from "./metrics.js";
import { nodeRoutes } from "./nodes.js";
import { shardRoutes } from "./shards.js";
import { versionInfo } from "../version.js";

/** Free unsharded nodes read per store call while nova's ring share is computed. */
const FREE_PAGE = 1000;

export interface AppOptions {
  authority: TokenAuthority;
  catalog?: ShardCatalog;
  /** trait rules, ownership and the webhook secret; defaults: no rules, compute's ownership, no secret */
  inspector?: { rules: TraitRule[]; ownership: OwnershipRegistry; secret?: string | undefined };
  /** where applied trait changes go in Ironic, if anywhere */
  ironic?: IronicOutbox;
  /** the Ironic API the fenced endpoint (/fenced/{shard}/lease-{token}/ironic) forwards to */
  ironicUrl?: string;
  /** the legacy ring pool: ring kind, rebuild period, service down time, clock */
  legacy?: LegacyPoolOptions & { serviceDownMs?: number };
}

/**
 * The bridge's HTTP API as one request listener: the lease writes agents make several
 * times a second (see leaseWrites), then express for everything else.
 */
export type BridgeApp = (req: IncomingMessage, res: ServerResponse) => void;

export function createApp(
  store: Store,
  {
    authority,
    catalog = new ShardCatalog(),
    inspector = { rules: [], ownership: new OwnershipRegistry() },
    ironic,
    ironicUrl,
    legacy = {},
  }: AppOptions,
): BridgeApp {
  const app = express();
  app.disable("x-powered-by");
  const metrics = new BridgeMetrics(store);
  if (ironic !== undefined) metrics.watchIronic(ironic);
  app.use(metrics.middleware());
  // A strong hash of every answer, for caching nobody does here: not worth its cost per renew.
  app.set("etag", false);
  app.use((req, res, next) => {
    const requestId = requestIdOf(req.get("x-request-id"));
    res.set("x-request-id", requestId);
    const started = performance.now();
    res.on("finish", () =>
      logRequest(
        { method: req.method, url: req.originalUrl },
        res.statusCode,
        requestId,
        performance.now() - started,
      ),
    );
    res.locals.requestId = requestId;
    next();
  });
  // Which build answers: the same as `shardbridge --version` on that host.
  const { version, commit } = versionInfo();
  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok", version, commit });
  });
  app.get("/readyz", async (_req, res) => {
    try {
      await store.ping();
      res.json({ status: "ready", store: store.kind, version, commit });
    } catch (error) {
      res
        .status(503)
        .json({ status: "store unreachable", store: store.kind, error: String(error), version, commit });
    }
  });
  app.use(metrics.routes());
  // Everything below needs a bearer token; health checks and metrics above do not.
  // Authenticate first: nobody without a token makes the bridge read a body.
  app.use(authenticate(authority));
  app.use(readBody((req) => bodyPolicy(req.path).limit));
  app.use((req, res, next) => (bodyPolicy(req.path).parseHere ? parseJsonBody(req, res, next) : next()));
  // The store's definitions join the files' in the catalog, read again when they change.
  const stored = new StoredDefinitions(store, catalog).start();
  void stored.refresh().catch(() => undefined); // the timer retries and logs
  app.use(leaseRoutes(store));
  app.use(definitionRoutes(stored, catalog));
  app.use(shardRoutes(store, catalog, ironicUrl !== undefined));
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
  app.use(traitRoutes(traits));
  app.use(feedRoutes(store, traits));
  app.use(ironicDeliveryRoutes(ironic));
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
  const writes = leaseWrites({ store, catalog, metrics, authority });
  const webhook = webhookRoute({ service: traits, decoder, secret: inspector.secret, metrics, authority });
  const proxy = ironicUrl === undefined ? () => false : fencedIronic({ store, catalog, metrics, ironicUrl });
  return (req, res) => {
    if (!writes(req, res) && !webhook(req, res) && !proxy(req, res)) app(req, res);
  };
}
