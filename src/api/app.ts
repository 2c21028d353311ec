import { randomUUID } from "node:crypto";
import express, { type Express } from "express";
import { logger, requestContext } from "../log.js";
import { ShardCatalog } from "../shards/definitions.js";
import type { Store } from "../store/store.js";
import { agentRoutes } from "./agents.js";
import { authenticate, type TokenAuthority } from "./auth.js";
import { HttpError, errorHandler } from "./errors.js";
import { leaseRoutes } from "./leases.js";
import { BridgeMetrics } from "./metrics.js";
import { nodeRoutes } from "./nodes.js";
import { shardRoutes } from "./shards.js";

/** Request bodies above this are refused with 413 before they are parsed. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** The bulk node load is the one exception: 20,000 nodes need more than 1 MiB. */
export const MAX_BULK_BODY_BYTES = 8 * 1024 * 1024;
const BULK_PATH = "/v1/nodes/bulk";

export interface AppOptions {
  authority: TokenAuthority;
  catalog?: ShardCatalog;
}

export function createApp(store: Store, { authority, catalog = new ShardCatalog() }: AppOptions): Express {
  const app = express();
  app.disable("x-powered-by");
  const metrics = new BridgeMetrics(store);
  app.use(metrics.middleware());
  app.use((req, res, next) => {
    const requestId = req.get("x-request-id") ?? randomUUID();
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
  const json = express.json({ limit: MAX_BODY_BYTES, strict: true, type: () => true });
  const bulkJson = express.json({ limit: MAX_BULK_BODY_BYTES, strict: true, type: () => true });
  app.use((req, res, next) => (req.path === BULK_PATH ? bulkJson : json)(req, res, next));
  app.use(leaseRoutes(store, catalog, metrics));
  app.use(shardRoutes(store, catalog));
  app.use(nodeRoutes(store.nodes));
  app.use(agentRoutes(store, catalog));
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
