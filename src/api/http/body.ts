import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Request, RequestHandler } from "express";
import { ValidationError } from "../../core/validation.js";
import { HttpError } from "./errors.js";

declare module "express-serve-static-core" {
  interface Request {
    /**
     * the request body as sent, as it was read (see readRequestChunks), by `readBody`:
     * empty when there was none
     */
    bodyChunks?: Buffer[];
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
function refuseUnread(res: ServerResponse, error: HttpError): HttpError {
  res.setHeader("connection", "close");
  res.once("finish", () => res.socket?.destroySoon());
  return error;
}

/**
 * What a body may be declared as: `json`, the API's bodies; `any`, a body the route judges
 * itself (the status page's login form) or passes on as it is (the fenced Ironic endpoint).
 */
export type BodyMedia = "json" | "any";

/**
 * Media types a JSON body may be declared as: none, JSON (`application/json`, any
 * `application/*+json`), or a form — `curl -d` declares its body so unless told otherwise,
 * and the docs' examples send JSON that way. Anything else (`text/plain`, a multipart
 * upload) is answered 415 rather than parsed as JSON on a guess.
 */
const JSON_MEDIA = /^application\/(?:json|[^;\s/]+\+json|x-www-form-urlencoded)$/;

/** A request's media type, lower-cased, without its parameters (`; charset=…`); undefined when none. */
export function mediaTypeOf(headers: IncomingHttpHeaders): string | undefined {
  return headers["content-type"]?.split(";")[0]!.trim().toLowerCase();
}

/** What a request's Content-Type says that a JSON body cannot be, if anything. */
function notJson(headers: IncomingHttpHeaders): string | null {
  const media = mediaTypeOf(headers);
  if (media === undefined) return null;
  return JSON_MEDIA.test(media)
    ? null
    : `content type ${JSON.stringify(media)} is not JSON: send application/json`;
}

/** What a request says of its body's encoding that the bridge does not decode, if anything. */
function undecodable(headers: IncomingHttpHeaders, media: BodyMedia): string | null {
  if (media === "json") {
    const problem = notJson(headers);
    if (problem !== null) return problem;
  }
  const encoding = headers["content-encoding"];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== "identity")
    return `content encoding ${JSON.stringify(encoding)} is not supported: send the body as is`;
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(headers["content-type"] ?? "")?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset))
    return `charset ${JSON.stringify(charset)} is not supported: send UTF-8`;
  return null;
}

/** A body past this size is read one chunk per turn of the event loop (see readRequestChunks). */
const SPREAD_AFTER_BYTES = 64 * 1024;

/**
 * The body as it was read, at most `limit` bytes: the chunks the socket gave, not joined.
 * A declared Content-Length over the limit is refused (413) on the header, before a byte
 * of the body is read; a chunked body is refused the moment it passes the limit. Either
 * way the connection closes after the answer, so an oversized body is never read to its end.
 *
 * Not joined, because joining megabytes is a copy of them in one step of the event loop
 * (on this VM, with fresh pages faulting in, 10–20 ms for a bulk of 20,000 nodes); each
 * chunk is memory of its own, which the decode pool moves to its worker as it is (see
 * decode/transfer.ts). Routes that take small bodies join them (readRequestBody).
 */
export function readRequestChunks(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  media: BodyMedia = "json",
): Promise<Buffer[]> {
  const declared = req.headers["content-length"];
  const chunked = req.headers["transfer-encoding"] !== undefined;
  if (!chunked && (declared === undefined || declared === "0")) return Promise.resolve([]);
  const problem = undecodable(req.headers, media);
  if (problem !== null)
    return Promise.reject(
      refuseUnread(res, refused(415, "shardbridge.body.invalid", "Body not accepted", problem)),
    );
  if (declared !== undefined && Number(declared) > limit)
    return Promise.reject(refuseUnread(res, tooLarge(limit)));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    let settled = false;
    const settle = (error?: HttpError) => {
      settled = true;
      req.off("data", onData).off("end", onEnd).off("error", onError).off("aborted", onAborted);
      if (error !== undefined) reject(error);
      else resolve(chunks);
    };
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        req.pause();
        return settle(refuseUnread(res, tooLarge(limit)));
      }
      chunks.push(chunk);
      // Left alone, libuv reads up to 32 times 64 KiB from a socket in one turn of the loop,
      // and node's HTTP parser copies each read: 2 MiB in one step (with its pages faulting
      // in, over 10 ms on this VM). Paused after each chunk past the first, the socket stops
      // being read until the next turn: one chunk a turn, and renews between them.
      if (length > SPREAD_AFTER_BYTES) {
        req.pause();
        setImmediate(() => settled || req.resume());
      }
    };
    const onEnd = () => settle();
    const onAborted = () =>
      settle(refused(400, "shardbridge.body.invalid", "Body not accepted", "the client aborted the body"));
    const onError = (error: Error) =>
      settle(refused(400, "shardbridge.body.invalid", "Body not accepted", error.message));
    req.on("data", onData).on("end", onEnd).on("error", onError).on("aborted", onAborted);
  });
}

/** A body's chunks as one Buffer (for small bodies: see readRequestChunks). */
export function joinChunks(chunks: readonly Buffer[]): Buffer {
  return chunks.length === 1 ? chunks[0]! : chunks.length === 0 ? EMPTY : Buffer.concat(chunks);
}

/** The body whole, at most `limit` bytes (see readRequestChunks): for routes whose bodies are small. */
export async function readRequestBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  media: BodyMedia = "json",
): Promise<Buffer> {
  return joinChunks(await readRequestChunks(req, res, limit, media));
}

/** Read the body into `req.bodyChunks`, at most `limitFor(req)` bytes (see readRequestChunks). */
export function readBody(limitFor: (req: Request) => number): RequestHandler {
  return (req, res, next) => {
    readRequestChunks(req, res, limitFor(req)).then((chunks) => {
      req.bodyChunks = chunks;
      next();
    }, next);
  };
}

/** `raw` as JSON: undefined when empty, a 400 when it is not JSON. */
export function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch (error) {
    throw refused(400, "shardbridge.body.malformed", "Malformed JSON", (error as Error).message);
  }
}

/** Parse `req.bodyChunks` as JSON into `req.body` (undefined when the body is empty). */
export const parseJsonBody: RequestHandler = (req, _res, next) => {
  req.body = parseJson(joinChunks(req.bodyChunks ?? []));
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
