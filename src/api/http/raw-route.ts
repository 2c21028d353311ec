import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline, Readable } from "node:stream";
import { ValidationError } from "../../core/validation.js";
import { logger } from "../../runtime/log.js";
import { errorAnswer } from "./errors.js";
import type { BridgeMetrics } from "./metrics.js";
import { logRequest, requestIdOf } from "./request-log.js";

/** What a route served on node:http answers: a JSON body, bytes as they are, a stream, or nothing. */
export interface RawAnswer {
  status: number;
  headers?: Record<string, string | string[]>;
  /**
   * JSON-encoded unless it is a Buffer, which goes out as it is, or a Readable, piped to
   * the client at the pace it reads (chunked); the stream is destroyed if the client leaves
   */
  body?: unknown;
}

/** How a raw route is served: see serveRaw. */
export interface RawRouteOptions {
  /** the field a path segment that is not valid percent-encoding is reported under */
  pathField: string;
  /** the path as the request log shows it, where the request's own must not be logged */
  logPath?: string;
}

/**
 * How long a request waited on purpose (a waiting acquire's wait): not its duration to the
 * request metrics and the slow-request log, which would otherwise show every standby's
 * wait as a slow lease write. Set by the route, read once as it is answered.
 */
const waited = new WeakMap<ServerResponse, number>();
export function noteWaited(res: ServerResponse, ms: number): void {
  waited.set(res, ms);
}

/**
 * Serve one request on node:http, ahead of express, with the steps express's pipeline
 * gives the other routes: a request id, the API-SIG error shape for whatever `work`
 * throws (a path segment that is not valid percent-encoding names `options.pathField`),
 * the request metrics under `route`, and the request log.
 */
export function serveRaw(
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  metrics: BridgeMetrics,
  options: RawRouteOptions,
  work: (requestId: string) => Promise<RawAnswer>,
): void {
  const started = performance.now();
  const requestId = requestIdOf(req.headers["x-request-id"] as string | undefined);
  const logged = options.logPath === undefined ? req : { method: req.method, url: options.logPath };
  const counted = (status: number) => {
    const ms = performance.now() - started - (waited.get(res) ?? 0);
    metrics.countRequest(route, req.method!, status, ms / 1000);
    logRequest(logged, status, requestId, ms);
  };
  const finish = ({ status, headers = {}, body }: RawAnswer) => {
    if (body instanceof Readable) {
      res.writeHead(status, { ...headers, "x-request-id": requestId });
      // Counted once the last byte is out (or the client left): a stream's time is its answer's.
      pipeline(body, res, () => counted(status));
      return;
    }
    const raw = Buffer.isBuffer(body);
    const bytes = raw ? body : body === undefined ? "" : JSON.stringify(body);
    res.writeHead(status, {
      ...headers,
      "x-request-id": requestId,
      ...(!raw && bytes !== "" && { "content-type": "application/json; charset=utf-8" }),
      "content-length": raw ? bytes.length : Buffer.byteLength(bytes),
    });
    res.end(bytes);
    counted(status);
  };
  work(requestId).then(finish, (error: unknown) => {
    const failed =
      error instanceof URIError
        ? new ValidationError([{ field: options.pathField, reason: "is not valid percent-encoding" }])
        : error;
    // Refused before its body had all arrived (a 401 on a request still sending megabytes):
    // the connection closes after the answer rather than read a body nobody wants.
    if (!req.complete) {
      res.setHeader("connection", "close");
      res.once("finish", () => res.socket?.destroySoon());
    }
    const answer = errorAnswer(failed, (logged.url ?? "").split("?")[0]!, (message, meta) =>
      logger.error(message, { ...meta, request_id: requestId }),
    );
    finish({ status: answer.status, headers: answer.headers, body: { errors: answer.errors } });
  });
}
