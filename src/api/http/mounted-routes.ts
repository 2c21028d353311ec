import type { IncomingMessage, ServerResponse } from "node:http";
import type { Express } from "express";

/**
 * One route the app serves: an HTTP method and a path template with `{name}` for each
 * parameter, as an OpenAPI document writes its paths, so the two compare as they are.
 */
export interface MountedRoute {
  method: string;
  path: string;
}

/**
 * A route served on node:http ahead of express (the lease writes, the inspector webhook,
 * the fenced Ironic endpoint): answers whether it took the request, and lists the routes
 * it takes, so the app can say everything it serves (see BridgeApp.routes).
 */
export type RawHandler = ((req: IncomingMessage, res: ServerResponse) => boolean) & {
  readonly routes: readonly MountedRoute[];
};

/** `handle` with the routes it serves, given in express's syntax (`:name`, `*name`). */
export function rawHandler(
  routes: ReadonlyArray<{ method: string; path: string }>,
  handle: (req: IncomingMessage, res: ServerResponse) => boolean,
): RawHandler {
  return Object.assign(handle, {
    routes: routes.map(({ method, path }) => ({ method, path: pathTemplate(path) })),
  });
}

/** An express path (`/v1/shards/:shard`, `/x/*rest`) as a path template (`/v1/shards/{shard}`, `/x/{rest}`). */
export function pathTemplate(expressPath: string): string {
  return expressPath.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}");
}

/** What express 5's router keeps of each `use` and route (router 2.x's Layer). */
interface Layer {
  rawPath?: unknown;
  slash?: boolean;
  route?: { path: unknown; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
}

/**
 * Every route in express's router stack, nested routers included, read from the app
 * itself: what a document of the API must list. A router mounted under a path that is not
 * a string, or a middleware other than a router mounted under a path (a static folder,
 * say), cannot be listed route by route: it is refused here, so a test notices it rather
 * than miss what it serves.
 */
export function expressRoutes(app: Express): MountedRoute[] {
  const found: MountedRoute[] = [];
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route !== undefined) {
        if (typeof layer.route.path !== "string")
          throw new Error(`a route under ${prefix || "/"} has a path that is not a string`);
        for (const [method, on] of Object.entries(layer.route.methods))
          if (on && method !== "_all")
            found.push({ method: method.toUpperCase(), path: pathTemplate(prefix + layer.route.path) });
        continue;
      }
      const mounted = layer.slash === true ? "" : layer.rawPath;
      if (layer.handle.stack !== undefined) {
        if (typeof mounted !== "string")
          throw new Error(`a router under ${prefix || "/"} has no string path`);
        walk(layer.handle.stack, prefix + mounted);
      } else if (mounted !== "" && mounted !== "/") {
        throw new Error(
          `a middleware is mounted under ${prefix}${String(mounted)}: its routes cannot be listed`,
        );
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, "");
  return found;
}
