import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { BridgeApp } from "../app.js";
import type { ApiError } from "./errors.js";

/** What Node's parser reports, by its error code, as the answer a client can act on. */
function faultOf(code: string | undefined): ApiError {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return {
        status: 431,
        code: "shardbridge.request.headers_too_large",
        title: "Request headers too large",
        detail: "the request's headers are over the server's limit (16 KiB)",
      };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return {
        status: 408,
        code: "shardbridge.request.timeout",
        title: "Request timeout",
        detail: "the request did not arrive whole in time",
      };
    default:
      return {
        status: 400,
        code: "shardbridge.request.malformed",
        title: "Malformed HTTP request",
        detail: `the request is not valid HTTP/1.1 (${code ?? "parse error"})`,
      };
  }
}

const REASONS: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
};

/**
 * Requests Node refuses before express sees them (a bare CR in a header, Content-Length
 * together with Transfer-Encoding, headers over the limit) are answered in the same
 * API-SIG shape as every other error, then the connection is closed: after a framing
 * error nothing more on it can be trusted. Where an answer is already on its way, or the
 * peer is gone, there is nothing to say and the socket is only destroyed.
 */
function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if (error.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent === true) {
    socket.destroy();
    return;
  }
  const fault = faultOf(error.code);
  const body = JSON.stringify({ errors: [fault] });
  socket.end(
    `HTTP/1.1 ${fault.status} ${REASONS[fault.status]}\r\n` +
      "content-type: application/json; charset=utf-8\r\n" +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      "connection: close\r\n\r\n" +
      body,
  );
}

/** The bridge's HTTP server for `app`: every refusal, even Node's own, in the API-SIG shape. */
export function bridgeServer(app: BridgeApp): Server {
  // Built from the classes express's prototypes were moved to (see message-classes.ts).
  const server = createServer(app.messageClasses, app);
  server.on("clientError", answerClientError);
  // Node answers `Expect: 100-continue` at once unless asked: a caller without a known
  // token would be invited to send its body, and only then refused. Here the invitation
  // waits for the token; without one the route answers 401 (and closes) with no body sent.
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    if (app.mayContinue(req)) res.writeContinue();
    app(req, res);
  });
  return server;
}
