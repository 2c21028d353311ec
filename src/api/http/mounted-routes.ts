import type { IncomingMessage, ServerResponse } from "node:http";
import type { Operation } from "../openapi/operation.js";

/**
 * One route the app serves: an HTTP method and a path template with `{name}` for each
 * parameter, as its operation declares it and the OpenAPI document writes it.
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

/** `handle` with the operations it serves (their declarations: see operation.ts). */
export function rawHandler(
  operations: ReadonlyArray<Pick<Operation, "method" | "path">>,
  handle: (req: IncomingMessage, res: ServerResponse) => boolean,
): RawHandler {
  return Object.assign(handle, {
    routes: operations.map(({ method, path }) => ({ method: method.toUpperCase(), path })),
  });
}
