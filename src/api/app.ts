import type { IncomingMessage, ServerResponse } from "node:http";
import express from "express";
import { logger } from "../log.js";
import { logRequest, requestIdOf } from "./http/request-log.js";
import { ShardCatalog } from "../shards/definitions.js";
import { StoredDefinitions } from "../shards/stored-definitions.js";
import { definitionRoutes } from "./routes/shard-definitions.js";
import type { Store } from "../store/store.js";
import { agentRoutes } from "./routes/agents.js";
import { legacyPoolLoader } from "../shards/queries.js";
import { LegacyAssignments } from "../ring/assignment.js";
import { LegacyPool, type LegacyPoolOptions } from "../ring/pool.js";
import { SERVICE_DOWN_TIME_MS } from "../ring/membership.js";
import { authenticate, knownBearer, viewersRead, type TokenAuthority } from "./http/auth.js";
import { agentsOverview, deliveryOverview, leaseCensus, shardsOverview } from "./routes/overview.js";
import { uiRoutes } from "./ui/routes.js";
import { StatusWatcher } from "./ui/watcher.js";
import { readBody, parseJsonBody } from "./http/body.js";
import { DecodePool } from "./decode/pool.js";
import { HttpError, errorHandler } from "./http/errors.js";
import type { IronicQueueDelivery } from "../ironic/delivery.js";
import { OwnershipRegistry } from "../traits/ownership.js";
import type { TraitRule } from "../traits/inspection.js";
import { TraitService } from "../traits/service.js";
import { feedRoutes } from "./routes/feed.js";
import { ironicDeliveryRoutes } from "./routes/ironic-delivery.js";
import { traitRoutes, webhookRoute } from "./routes/inspector.js";
import { fencedIronic } from "./routes/fenced-ironic.js";
import { leaseRoutes, leaseWrites } from "./routes/leases.js";
import { LeaseWaits } from "../shards/lease-waits.js";
import { bodyPolicy } from "./http/limits.js";
import { BridgeMetrics } from "./http/metrics.js";
import { nodeRoutes } from "./routes/nodes.js";
import { shardRoutes } from "./routes/shards.js";
import { versionInfo } from "../version.js";
import { openApiText } from "./openapi/document.js";
import { expressRoutes, type MountedRoute } from "./http/mounted-routes.js";
import { stableMessageClasses, type MessageClasses } from "./http/message-classes.js";
import type { Health, NotReady, Ready } from "../contracts/health.js";

/** Free unsharded nodes read per store call while nova's ring share is computed. */
const FREE_PAGE = 500;

export interface AppOptions {
  authority: TokenAuthority;
  catalog?: ShardCatalog;
  /** trait rules, ownership and the webhook secret; defaults: no rules, compute's ownership, no secret */
  inspector?: { rules: TraitRule[]; ownership: OwnershipRegistry; secret?: string | undefined };
  /** the delivery of applied trait changes to Ironic, if any: commits queue them for it */
  ironic?: IronicQueueDelivery;
  /** the Ironic API the fenced endpoint (/fenced/{shard}/lease-{token}/ironic) forwards to */
  ironicUrl?: string;
  /** the legacy ring pool: ring kind, rebuild period, service down time, clock */
  legacy?: LegacyPoolOptions & { serviceDownMs?: number };
  /** the trait service, when the caller shares it (with the notification listener); else made here */
  traits?: TraitService;
}

/** The trait service over the store: every committed change queued for Ironic when it delivers there. */
export function bridgeTraits(
  store: Store,
  ownership: OwnershipRegistry,
  ironic?: IronicQueueDelivery,
): TraitService {
  return new TraitService(store.traits, store.nodes, ownership, {
    toIronic: ironic !== undefined,
    onApplied: () => ironic?.nudge(),
  });
}

/**
 * The bridge's HTTP API as one request listener: the lease writes agents make several
 * times a second (see leaseWrites), then express for everything else. `routes`: every
 * route it serves, read from express's router and the raw routes' own tables — what the
 * OpenAPI document must list (test/openapi.test.ts holds the two together). `close` ends
 * what would keep a server's close waiting: the status pages' event streams, and the
 * acquires that wait (answered with the refusal they waited behind).
 * `messageClasses`: what a server serving it builds requests and responses from (see
 * message-classes.ts; bridgeServer does).
 */
export type BridgeApp = ((req: IncomingMessage, res: ServerResponse) => void) & {
  readonly routes: readonly MountedRoute[];
  readonly messageClasses: MessageClasses;
  /** whether a request that asks `Expect: 100-continue` may be told to send its body (see bridgeServer) */
  mayContinue(req: IncomingMessage): boolean;
  close(): void;
};

export function createApp(
  store: Store,
  {
    authority,
    catalog = new ShardCatalog(),
    inspector = { rules: [], ownership: new OwnershipRegistry() },
    ironic,
    ironicUrl,
    legacy = {},
    traits = bridgeTraits(store, inspector.ownership, ironic),
  }: AppOptions,
): BridgeApp {
  const app = express();
  const messageClasses = stableMessageClasses(app);
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
    res.json({ status: "ok", version, commit } satisfies Health);
  });
  app.get("/readyz", async (_req, res) => {
    try {
      await store.ping();
      res.json({ status: "ready", store: store.kind, version, commit } satisfies Ready);
    } catch (error) {
      res.status(503).json({
        status: "store unreachable",
        store: store.kind,
        error: String(error),
        version,
        commit,
      } satisfies NotReady);
    }
  });
  app.use(metrics.routes());
  // The API's description, as open as /healthz: it says what every install of this
  // version serves, and holds no token, shard or node (see openapi/operations.ts). Built
  // here, once per process (tens of ms), so no request holds the event loop building it.
  const openApi = openApiText();
  app.get("/openapi.json", (_req, res) => {
    res.type("application/json").send(openApi);
  });
  const serviceDownMs = legacy.serviceDownMs ?? SERVICE_DOWN_TIME_MS;
  // The status page: one look at the store per period for all its open pages, with
  // tokens (they tell a new lease from a renewed one; the page never shows them).
  const watcher = new StatusWatcher(
    async () => {
      const census = await leaseCensus(store, catalog);
      const [shards, agents, delivery] = await Promise.all([
        shardsOverview(store, catalog, census, true),
        agentsOverview(store, catalog, census, serviceDownMs),
        deliveryOverview(ironic),
      ]);
      const at = new Date().toISOString();
      return { at, shards, agents, down_after_ms: serviceDownMs, ironic: delivery };
    },
    (shard) => catalog.ttlMsFor(shard),
  );
  // Its own login (a session cookie), so it comes before the bearer token check.
  const ui = uiRoutes(authority, watcher);
  app.use(ui);
  // Everything below needs a bearer token; health checks, metrics, the document and the
  // page's own login above do not.
  // Authenticate first: nobody without a token makes the bridge read a body.
  app.use(authenticate(authority));
  app.use(viewersRead());
  app.use(readBody((req) => bodyPolicy(req.path).limit));
  app.use((req, res, next) => (bodyPolicy(req.path).parseHere ? parseJsonBody(req, res, next) : next()));
  // The store's definitions join the files' in the catalog, read again when they change.
  const stored = new StoredDefinitions(store, catalog).start();
  void stored.refresh().catch(() => undefined); // the timer retries and logs
  app.use(leaseRoutes(store));
  app.use(definitionRoutes(stored, catalog));
  app.use(shardRoutes(store, catalog, ironicUrl !== undefined));
  // Large bodies (a bulk, an inspection result) are decoded off the event loop.
  const decoder = new DecodePool(inspector.rules);
  app.use(nodeRoutes(store.nodes, traits, decoder));
  const pool = new LegacyPool(legacyPoolLoader(store, catalog, serviceDownMs), legacy);
  const assignments = new LegacyAssignments({
    pages: async function* () {
      for await (const page of store.nodes.pages({ kind: "free" }, FREE_PAGE)) yield page.map((n) => n.uuid);
    },
    version: () => store.nodes.poolVersion(),
  });
  app.use(agentRoutes(store, catalog, pool, assignments, decoder, serviceDownMs));
  app.use(traitRoutes(traits));
  app.use(feedRoutes(store, catalog, traits));
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
  const waits = new LeaseWaits(store);
  metrics.watchLeaseWaits(waits);
  const writes = leaseWrites({ store, catalog, metrics, authority, waits });
  const webhook = webhookRoute({ service: traits, decoder, secret: inspector.secret, metrics, authority });
  const raw = [writes, webhook];
  if (ironicUrl !== undefined) raw.push(fencedIronic({ store, catalog, metrics, ironicUrl }));
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    for (const route of raw) if (route(req, res)) return;
    app(req, res);
  };
  // Read when asked (the contract test), not at start: a route added in a form that cannot
  // be listed fails that test, never a bridge starting up.
  return Object.defineProperty(
    Object.assign(listener, {
      close: () => {
        ui.close();
        waits.close();
      },
      messageClasses,
      // A body is invited only from a caller whose bearer token is known, or to the fenced
      // endpoint (its credential is the lease in its path and the caller's own Keystone
      // token, which Ironic checks): anyone else is answered 401 without sending one.
      mayContinue: (req: IncomingMessage) =>
        (req.url ?? "").startsWith("/fenced/") || knownBearer(authority, req.headers.authorization),
    }),
    "routes",
    {
      get: (): MountedRoute[] => [...raw.flatMap((route) => route.routes), ...expressRoutes(app)],
    },
  ) as BridgeApp;
}
