import type { IncomingMessage, ServerResponse } from "node:http";
import express from "express";
import { logger } from "../runtime/log.js";
import { logRequest, requestIdOf } from "./http/request-log.js";
import type { ShardCatalog } from "../bridge/shards/catalog.js";
import type { StoredDefinitions } from "../bridge/shards/stored-definitions.js";
import type { NodesMark } from "../store/nodes-mark.js";
import { definitionRoutes } from "./routes/shard-definitions.js";
import type { Store } from "../store/store.js";
import type { AgentNodeLists } from "../bridge/shards/agent-nodes.js";
import { agentRoutes, heartbeatWrite } from "./routes/agents.js";
import type { LegacyAssignments } from "../bridge/legacy-assignment.js";
import type { LegacyPool } from "../core/ring/pool.js";
import { authenticate, knownBearer, viewersRead, type TokenAuthority } from "./http/auth.js";
import { deliveryOverview } from "../bridge/ironic/delivery-overview.js";
import { agentsOverview, leaseCensus, shardsOverview } from "../bridge/shards/overview.js";
import { pageHeaders, uiRoutes } from "./ui/routes.js";
import { StatusWatcher } from "./ui/status-watcher.js";
import type { DecodePool } from "./decode/decode-pool.js";
import { HttpError, errorHandler } from "./http/errors.js";
import type { IronicQueueDelivery } from "../bridge/ironic/delivery.js";
import type { TraitService } from "../bridge/trait-service.js";
import { feedRoutes } from "./routes/feed.js";
import { ironicDeliveryRoutes } from "./routes/ironic-delivery.js";
import { traitRoutes, webhookRoute } from "./routes/inspector.js";
import { fencedIronic, type FencedLimits } from "./routes/fenced-ironic.js";
import { leaseRoutes, leaseWrites } from "./routes/leases.js";
import type { LeaseWaits } from "../bridge/shards/lease-waits.js";
import { BridgeMetrics } from "./http/metrics.js";
import { nodeRoutes } from "./routes/nodes.js";
import { healthRoutes } from "./routes/health.js";
import { shardRoutes } from "./routes/shards.js";
import { openApiText } from "./openapi/document.js";
import type { MountedRoute } from "./http/mounted-routes.js";
import type { DeclaredRoutes } from "./http/declared-routes.js";
import { stableMessageClasses, type MessageClasses } from "./http/message-classes.js";

/**
 * What the API serves, built by the composition root (src/cli/bridge-services.ts): the
 * app mounts routes over these and builds only what is its own (metrics, the status
 * page's watcher, the document).
 */
export interface BridgeServices {
  store: Store;
  catalog: ShardCatalog;
  /** the store's shard definitions, joined to the catalog's and kept fresh */
  definitions: StoredDefinitions;
  /** the mark of the store's nodes, looked at to notice a store that lost them */
  nodesMark: NodesMark;
  traits: TraitService;
  /** bodies decoded off the event loop, the inspection rules applied there */
  decoder: DecodePool;
  /** the inspector webhook's HMAC secret; without one the webhook answers 503 */
  webhookSecret: string | undefined;
  /** the delivery of applied trait changes to Ironic, if any */
  ironic?: IronicQueueDelivery;
  legacyPool: LegacyPool;
  assignments: LegacyAssignments;
  /** the acquires waiting for a held lease (wait_ms) */
  waits: LeaseWaits;
  /** agents' node lists: the shards' kept listings and the grants each agent was seen with */
  nodeLists: AgentNodeLists;
  /** how long an agent may stay silent before nova's ring counts it down */
  serviceDownMs: number;
}

export interface AppOptions {
  authority: TokenAuthority;
  /** the Ironic API the fenced endpoint (/fenced/{shard}/lease-{token}-{fence_key}/ironic) forwards to */
  ironicUrl?: string;
  /** the fenced endpoint's bounds (default FENCED_LIMITS) */
  fencedLimits?: Partial<FencedLimits>;
}

/**
 * The bridge's HTTP API as one request listener: the lease writes agents make several
 * times a second (see leaseWrites), then express for everything else. `routes`: every
 * route it serves, from the operations its routes are declared by — what the
 * OpenAPI document must list (test/openstack/openapi.test.ts holds the two together). `close` ends
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
  services: BridgeServices,
  { authority, ironicUrl, fencedLimits }: AppOptions,
): BridgeApp {
  const { store, catalog, definitions, traits, decoder, ironic, legacyPool, assignments, waits } = services;
  const { nodeLists, serviceDownMs } = services;
  const app = express();
  const messageClasses = stableMessageClasses(app);
  app.disable("x-powered-by");
  const metrics = new BridgeMetrics(store, (shard) => catalog.get(shard) !== undefined);
  if (ironic !== undefined) metrics.watchIronic(ironic);
  metrics.watchStoreLosses(definitions, services.nodesMark);
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
  const declared: DeclaredRoutes[] = [];
  const serve = (routes: DeclaredRoutes) => {
    declared.push(routes);
    app.use(routes.router);
  };
  serve(healthRoutes(store, openApiText()));
  serve(metrics.routes());
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
  app.use(pageHeaders);
  const ui = uiRoutes(authority, watcher);
  serve(ui);
  // Everything below needs a bearer token; health checks, metrics, the document and the
  // page's own login above do not. Authenticate first: nobody without a token makes the
  // bridge read a body (each route reads its own, after its role check: DeclaredRoutes).
  app.use(authenticate(authority));
  app.use(viewersRead());
  serve(leaseRoutes(store));
  serve(definitionRoutes(definitions, catalog));
  serve(shardRoutes(store, catalog, ironicUrl !== undefined));
  serve(nodeRoutes(store.nodes, traits, decoder));
  serve(agentRoutes(store, catalog, legacyPool, assignments, nodeLists, serviceDownMs));
  serve(traitRoutes(traits));
  serve(feedRoutes(store, catalog, traits));
  serve(ironicDeliveryRoutes(ironic));
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
  metrics.watchLeaseWaits(waits);
  const writes = leaseWrites({ store, catalog, metrics, authority, waits });
  const webhook = webhookRoute({
    service: traits,
    decoder,
    secret: services.webhookSecret,
    metrics,
    authority,
  });
  const heartbeats = heartbeatWrite({ store, decoder, metrics, authority, serviceDownMs });
  const raw = [writes, heartbeats, webhook];
  if (ironicUrl !== undefined)
    raw.push(
      fencedIronic({ store, catalog, metrics, ironicUrl, ...(fencedLimits && { limits: fencedLimits }) }),
    );
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    for (const route of raw) if (route(req, res)) return;
    app(req, res);
  };
  return Object.defineProperty(
    Object.assign(listener, {
      close: () => {
        ui.close();
        waits.close();
        definitions.stop();
        services.nodesMark.stop();
      },
      messageClasses,
      // A body is invited only from a caller whose bearer token is known: anyone else is
      // answered 401 without sending one. The fenced endpoint invites it itself, once the
      // lease's token and key in its path have been checked.
      mayContinue: (req: IncomingMessage) =>
        !(req.url ?? "").startsWith("/fenced/") && knownBearer(authority, req.headers.authorization),
    }),
    "routes",
    {
      get: (): MountedRoute[] => [...raw, ...declared].flatMap((routes) => routes.routes),
    },
  ) as BridgeApp;
}
