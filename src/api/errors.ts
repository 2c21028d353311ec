import type { ErrorRequestHandler } from "express";
import { ValidationError } from "../domain/validation.js";
import { StoreUnavailableError } from "../store/errors.js";

/** One error in the OpenStack API-SIG shape. */
export interface ApiError {
  status: number;
  code: string;
  title: string;
  detail: string;
  /** the request field at fault, for validation errors */
  field?: string;
  /** for a refused lease: the live lease in the way, so a client need not parse `detail` */
  lease?: { holder: string; token: number; ttl_ms: number; since: string } | null;
  /** for a refused lease: when asking again can succeed */
  retry_after_ms?: number;
}

/** An error a route raises on purpose, answered as-is. */
export class HttpError extends Error {
  constructor(readonly errors: ApiError[]) {
    super(errors.map((e) => e.detail).join("; "));
  }
  get status(): number {
    return this.errors[0]?.status ?? 500;
  }
}

export function validationErrors(error: ValidationError): ApiError[] {
  return error.issues.map((issue) => ({
    status: 400,
    code: "shardbridge.validation",
    title: "Invalid request",
    detail: `${issue.field}: ${issue.reason}`,
    field: issue.field,
  }));
}

/** What the body parser raises, mapped to the reason a client can act on. */
function parserError(error: { type?: string; status?: number; message?: string }): ApiError | null {
  if (error.type === "entity.too.large") {
    return {
      status: 413,
      code: "shardbridge.body.too_large",
      title: "Body too large",
      detail: "request body is over the limit",
    };
  }
  if (
    typeof error.status === "number" &&
    error.status >= 400 &&
    error.status < 500 &&
    error.type !== "entity.parse.failed"
  ) {
    // Other body-parser refusals: an unsupported charset or content encoding, an aborted body.
    return {
      status: error.status,
      code: "shardbridge.body.invalid",
      title: "Body not accepted",
      detail: error.message ?? "",
    };
  }
  if (error.type === "entity.parse.failed") {
    return {
      status: 400,
      code: "shardbridge.body.malformed",
      title: "Malformed JSON",
      detail: error.message ?? "body is not JSON",
    };
  }
  return null;
}

/** The last handler: every error becomes `{"errors":[...]}` with the right status. */
export function errorHandler(log: (message: string, meta: object) => void): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    let errors: ApiError[];
    if (error instanceof HttpError) errors = error.errors;
    else if (error instanceof ValidationError) errors = validationErrors(error);
    else if (error instanceof StoreUnavailableError) {
      errors = [
        {
          status: 503,
          code: "shardbridge.store.unavailable",
          title: "Store unavailable",
          detail: error.message,
        },
      ];
      log("store unavailable", { error: error.message, path: req.path });
    } else {
      errors = [
        parserError(error as object) ?? {
          status: 500,
          code: "shardbridge.internal",
          title: "Internal error",
          detail: "the bridge failed to answer; its log has the details",
        },
      ];
      if (errors[0]!.status >= 500)
        log("request failed", { error: String(error), stack: (error as Error).stack, path: req.path });
    }
    res.status(errors[0]!.status).json({ errors });
  };
}
