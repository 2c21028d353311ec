import { Router, type RequestHandler } from "express";
import { roleCheck, type Operation } from "../openapi/operation.js";
import { parseJsonBody, readBody } from "./body.js";
import { bodyPolicyOf } from "./limits.js";
import type { MountedRoute } from "./mounted-routes.js";

/** A declared path (`/v1/shards/{shard}`) in express's syntax (`/v1/shards/:shard`). */
export function expressPath(template: string): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ":$1");
}

/**
 * A declared path as a matcher of request URLs, the way express matches its routes: the
 * literal segments in any case, one trailing slash allowed, a query after; each `{name}`
 * one non-empty segment, captured in order (percent-encoded as sent). For the routes served
 * on node:http, so that their paths too are written once.
 */
export function urlPattern(template: string): RegExp {
  const literals = template.split(/\{[A-Za-z_][A-Za-z0-9_]*\}/);
  const source = literals.map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("([^/?#]+)");
  return new RegExp(`^${source}/?(?:\\?|$)`, "i");
}

/**
 * The express routes of one resource, each served from its operation's declaration
 * (operation.ts): express matches the declared method and path; a route that takes a
 * bearer token checks the roles its access names, then reads its body within the declared
 * limit (parsed as JSON here where the policy says so) — after the check, so a caller
 * without the role never makes the bridge read one. Nothing about a route is written
 * twice, and the app lists what it serves from here (`routes`), not from express's
 * internals.
 */
export class DeclaredRoutes {
  readonly router: Router = Router();
  private readonly served: Operation[] = [];

  /** Serve `operation` with `handlers`, after the steps its declaration asks for. */
  serve(operation: Operation, ...handlers: RequestHandler[]): this {
    const steps: RequestHandler[] = [];
    if (operation.access.kind === "bearer") {
      const policy = bodyPolicyOf(operation);
      steps.push(
        roleCheck(operation),
        readBody(() => policy.limit),
      );
      if (policy.parseHere) steps.push(parseJsonBody);
    }
    this.router[operation.method](expressPath(operation.path), ...steps, ...handlers);
    this.served.push(operation);
    return this;
  }

  /** Every route served here, as the OpenAPI document writes them. */
  get routes(): MountedRoute[] {
    return this.served.map(({ method, path }) => ({ method: method.toUpperCase(), path }));
  }
}
