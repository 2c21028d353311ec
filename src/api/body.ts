import type { Request, RequestHandler, Response } from "express";
import { ValidationError } from "../domain/validation.js";
import { HttpError } from "./errors.js";

declare module "express-serve-static-core" {
  interface Request {
    /** the request body as sent, read whole by `readBody` (empty when there was none) */
    rawBody?: Buffer;
  }
}

const EMPTY = Buffer.alloc(0);

function refused(status: number, code: string, title: string, detail: string): HttpError {
  return new HttpError([{ status, code, title, detail }]);
}

const tooLarge = (limit: number) =>
  refused(
    413,
    "shardbridge.body.too_large",
    "Body too large",
    `request body is over the limit of ${limit} bytes`,
  );

/**
 * A refusal given before the body was read whole: the rest of it is still on the wire,
 * so the connection cannot carry another request. Close it once the answer is out rather
 * than let the server drain a body that may be gigabytes long.
 */
function refuseUnread(res: Response, error: HttpError): HttpError {
  res.set("connection", "close");
  res.once("finish", () => res.socket?.destroySoon());
  return error;
}

/** What a request says of its body's encoding that the bridge does not decode, if anything. */
function undecodable(req: Request): string | null {
  const encoding = req.get("content-encoding");
  if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity")
    return `content encoding ${JSON.stringify(encoding)} is not supported: send the body as is`;
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.get("content-type") ?? "")?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset))
    return `charset ${JSON.stringify(charset)} is not supported: send UTF-8`;
  return null;
}

/**
 * Read the body whole into `req.rawBody`, at most `limitFor(req)` bytes. A declared
 * Content-Length over the limit is refused (413) on the header, before a byte of the body
 * is read; a chunked body is refused the moment it passes the limit. Either way the
 * connection closes after the answer, so an oversized body is never read to its end.
 */
export function readBody(limitFor: (req: Request) => number): RequestHandler {
  return (req, res, next) => {
    const limit = limitFor(req);
    const declared = req.get("content-length");
    const chunked = req.get("transfer-encoding") !== undefined;
    if (!chunked && (declared === undefined || declared === "0")) {
      req.rawBody = EMPTY;
      return next();
    }
    const problem = undecodable(req);
    if (problem !== null)
      return next(refuseUnread(res, refused(415, "shardbridge.body.invalid", "Body not accepted", problem)));
    if (declared !== undefined && Number(declared) > limit) return next(refuseUnread(res, tooLarge(limit)));
    const chunks: Buffer[] = [];
    let length = 0;
    let settled = false;
    const settle = (error?: HttpError) => {
      if (settled) return;
      settled = true;
      req.off("data", onData).off("end", onEnd).off("error", onError).off("aborted", onAborted);
      if (error !== undefined) return next(error);
      req.rawBody = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
      next();
    };
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        req.pause();
        return settle(refuseUnread(res, tooLarge(limit)));
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle();
    const onAborted = () =>
      settle(refused(400, "shardbridge.body.invalid", "Body not accepted", "the client aborted the body"));
    const onError = (error: Error) =>
      settle(refused(400, "shardbridge.body.invalid", "Body not accepted", error.message));
    req.on("data", onData).on("end", onEnd).on("error", onError).on("aborted", onAborted);
  };
}

/**
 * Parse `req.rawBody` as JSON into `req.body` (undefined when the body is empty). Routes
 * then decide whether they need a body: see `bodyObject`.
 */
export const parseJsonBody: RequestHandler = (req, _res, next) => {
  const raw = req.rawBody ?? EMPTY;
  if (raw.length === 0) {
    req.body = undefined;
    return next();
  }
  try {
    req.body = JSON.parse(raw.toString("utf8"));
  } catch (error) {
    return next(refused(400, "shardbridge.body.malformed", "Malformed JSON", (error as Error).message));
  }
  next();
};

/**
 * The parsed body of a route that needs one: a JSON object. A missing body, or JSON that
 * is not an object (an array, a string, null), is refused naming `(body)`, so no field of
 * it silently takes a default.
 */
export function bodyObject(req: Request): Record<string, unknown> {
  return asBodyObject(req.body);
}

/** `body` (parsed JSON, undefined when there was none) as an object, or a ValidationError naming `(body)`. */
export function asBodyObject(body: unknown): Record<string, unknown> {
  if (body === undefined)
    throw new ValidationError([{ field: "(body)", reason: "is missing: send a JSON object" }]);
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new ValidationError([{ field: "(body)", reason: "must be a JSON object" }]);
  return body as Record<string, unknown>;
}
