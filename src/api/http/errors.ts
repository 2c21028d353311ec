import type { ErrorRequestHandler } from "express";
import { MAX_LISTED_ISSUES, ValidationError } from "../../core/validation.js";
import { StoreUnavailableError } from "../../core/store-errors.js";
import { HostTwinError, ShardTwinError } from "../../core/names.js";
import type { ApiError } from "../../contracts/errors.js";

/** One error in the OpenStack API-SIG shape: the contract's (src/contracts/errors.ts). */
export type { ApiError };

/** An error a route raises on purpose, answered as-is (with `headers`, e.g. WWW-Authenticate). */
export class HttpError extends Error {
  constructor(
    readonly errors: ApiError[],
    readonly headers: Record<string, string> = {},
  ) {
    super(errors.map((e) => e.detail).join("; "));
  }
  get status(): number {
    return this.errors[0]?.status ?? 500;
  }
}

/** The 404 of a node the registry does not have: one shape wherever a node is named. */
export function nodeNotFound(uuid: string): ApiError {
  return {
    status: 404,
    code: "shardbridge.node.not_found",
    title: "No such node",
    detail: `node ${uuid} is not registered`,
  };
}

/**
 * The 409 of a request that is well formed but conflicts with the state it met (a stale
 * token, a lease held by another, an entry already past): one shape for every route.
 * `code` is under shardbridge.; `extra` adds the fields a client acts on (field, lease).
 */
export function conflict(
  code: string,
  title: string,
  detail: string,
  extra: Pick<ApiError, "field" | "lease" | "retry_after_ms" | "waited_ms"> = {},
): ApiError {
  return { status: 409, code: `shardbridge.${code}`, title, detail, ...extra };
}

/**
 * One error per listed field; past MAX_LISTED_ISSUES, one more under the field `(more)`
 * (as `(body)` and `(root)`, no field of the request) that counts the rest.
 */
export function validationErrors(error: ValidationError): ApiError[] {
  const errors: ApiError[] = error.issues.map((issue) => ({
    status: 400,
    code: "shardbridge.validation",
    title: "Invalid request",
    detail: `${issue.field}: ${issue.reason}`,
    field: issue.field,
  }));
  if (error.unlisted > 0)
    errors.push({
      status: 400,
      code: "shardbridge.validation",
      title: "Invalid request",
      detail: `(more): ${error.unlisted} more ${error.unlisted === 1 ? "problem" : "problems"}, not listed: only the first ${MAX_LISTED_ISSUES} are`,
      field: "(more)",
    });
  return errors;
}

/**
 * An error raised by express or Node itself with an HTTP status a client can act on (a
 * path that is not valid percent-encoding, say): its status, in the API-SIG shape.
 */
function clientFault(error: { status?: unknown; message?: string }): ApiError | null {
  if (typeof error.status !== "number" || error.status < 400 || error.status >= 500) return null;
  return {
    status: error.status,
    code: "shardbridge.request.invalid",
    title: "Request not accepted",
    detail: error.message ?? "",
  };
}

/** What to answer for `error`, raised anywhere in a request: status, headers and the API-SIG errors. */
export function errorAnswer(
  error: unknown,
  path: string,
  log: (message: string, meta: object) => void,
): { status: number; headers: Record<string, string>; errors: ApiError[] } {
  let errors: ApiError[];
  if (error instanceof HttpError) errors = error.errors;
  else if (error instanceof ValidationError) errors = validationErrors(error);
  else if (error instanceof HostTwinError)
    errors = [conflict("agent.host_twin", "Agent is another agent's host to nova", error.message)];
  else if (error instanceof ShardTwinError)
    errors = [
      conflict("shard.case_twin", "Shard is another defined shard to nova and Ironic", error.message, {
        field: "shard",
      }),
    ];
  else if (error instanceof StoreUnavailableError) {
    errors = [
      {
        status: 503,
        code: "shardbridge.store.unavailable",
        title: "Store unavailable",
        detail: error.message,
      },
    ];
    log("store unavailable", { error: error.message, path });
  } else {
    errors = [
      clientFault(error as object) ?? {
        status: 500,
        code: "shardbridge.internal",
        title: "Internal error",
        detail: "the bridge failed to answer; its log has the details",
      },
    ];
    if (errors[0]!.status >= 500)
      log("request failed", { error: String(error), stack: (error as Error).stack, path });
  }
  return { status: errors[0]!.status, headers: error instanceof HttpError ? error.headers : {}, errors };
}

/** The last handler: every error becomes `{"errors":[...]}` with the right status. */
export function errorHandler(log: (message: string, meta: object) => void): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const requestLog = (message: string, meta: object) =>
      log(message, { ...meta, request_id: res.locals.requestId as string | undefined });
    if (res.headersSent) {
      // A streamed answer failed half way: nothing can be said any more but that it is
      // cut short, so the client sees a broken answer, never a complete-looking one.
      requestLog("answer failed after it began", { error: String(error), path: req.path });
      res.destroy();
      return;
    }
    const answer = errorAnswer(error, req.path, requestLog);
    res.status(answer.status).set(answer.headers).json({ errors: answer.errors });
  };
}
