import { DeclaredRoutes } from "../http/declared-routes.js";
import type { Health, NotReady, Ready } from "../../contracts/health.js";
import type { Store } from "../../store/store.js";
import { versionInfo } from "../../runtime/version.js";
import type { Operation } from "../openapi/operation.js";

/** The bridge's own: liveness, readiness and the OpenAPI document (operations.ts lists them). */
export const HEALTH_OPERATIONS = {
  health: {
    method: "get",
    path: "/healthz",
    id: "health",
    tag: "operations",
    summary: "Liveness, and which build answers",
    access: { kind: "public" },
    answers: {
      200: { description: "alive; the version and commit `shardbridge --version` prints", schema: "Health" },
    },
    store: false,
  },
  ready: {
    method: "get",
    path: "/readyz",
    id: "ready",
    tag: "operations",
    summary: "Readiness: the store answers",
    access: { kind: "public" },
    answers: {
      200: { description: "the store answered a ping", schema: "Ready" },
      503: { description: "the store did not answer", schema: "NotReady" },
    },
    store: false,
  },
  openapi: {
    method: "get",
    path: "/openapi.json",
    id: "openapi",
    tag: "operations",
    summary: "This document",
    description:
      "Unauthenticated, like /healthz: it says what every install of this version serves and holds no token, shard or node.",
    access: { kind: "public" },
    answers: {
      200: {
        description: "the OpenAPI 3.1 document of this API",
        content: [
          {
            type: "application/json",
            schema: {
              type: "object",
              required: ["openapi", "info", "paths"],
              properties: {
                openapi: { const: "3.1.0" },
                info: { type: "object" },
                paths: { type: "object" },
              },
            },
          },
        ],
      },
    },
    store: false,
  },
} satisfies Record<string, Operation>;

/**
 * /healthz, /readyz and /openapi.json: open to anyone (no token, no shard, no node in
 * them). `openApi` is the document's text, built once per process by the app (tens of
 * ms), so no request holds the event loop building it.
 */
export function healthRoutes(store: Store, openApi: string): DeclaredRoutes {
  const routes = new DeclaredRoutes();
  // Which build answers: the same as `shardbridge --version` on that host.
  const { version, commit } = versionInfo();
  routes.serve(HEALTH_OPERATIONS.health, (_req, res) => {
    res.json({ status: "ok", version, commit } satisfies Health);
  });
  routes.serve(HEALTH_OPERATIONS.ready, async (_req, res) => {
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
  routes.serve(HEALTH_OPERATIONS.openapi, (_req, res) => {
    res.type("application/json").send(openApi);
  });
  return routes;
}
