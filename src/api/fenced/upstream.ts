import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { parseIronicEndpoint, type IronicEndpoint } from "../../upstream/ironic-endpoint.js";

/**
 * The one Ironic the fenced endpoint forwards to, from `serve --ironic URL`, and nothing
 * else: every request goes to this origin, at this base path, whatever the caller's path
 * says. Credentials in the URL (`http://user:pass@ironic/` for Ironic's http_basic) are the
 * bridge's own: dropped here, so they never ride on a caller's request (the bridge's own
 * calls to Ironic send them, see ironic/client.ts).
 */
export class IronicOrigin {
  private readonly endpoint: IronicEndpoint;
  /** where Ironic's links point: scheme, host and base path, no credentials */
  readonly linkBase: string;

  constructor(configured: string) {
    this.endpoint = parseIronicEndpoint(configured);
    this.linkBase = `${this.endpoint.origin}${this.endpoint.basePath}`;
  }

  /**
   * A request to Ironic at `path` (already checked, starting with "/") and `query`; the
   * origin and base path are this one's alone. `signal` aborts it (the caller left, or the
   * deadline passed); the caller writes the body and ends it.
   */
  request(
    method: string,
    path: string,
    query: string,
    headers: Record<string, string | string[]>,
    signal: AbortSignal,
  ): ClientRequest {
    const { protocol, hostname, port, basePath } = this.endpoint;
    const send = protocol === "https:" ? httpsRequest : httpRequest;
    return send({
      protocol,
      hostname,
      port,
      method,
      path: `${basePath}${path}${query}`,
      headers,
      signal,
      // One connection per request: Ironic's answer is streamed to one caller, and a kept
      // socket shared between callers would let one's slow read hold another's.
      agent: false,
    });
  }
}

/** An answer read whole (the fence's own look-ups: a few hundred bytes), at most `limit` bytes. */
export function readSmallAnswer(answer: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    answer.on("data", (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        answer.destroy(new Error(`Ironic's answer is over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    answer.on("end", () => resolve(Buffer.concat(chunks)));
    answer.on("error", reject);
    answer.on("aborted", () => reject(new Error("Ironic's answer was cut off")));
  });
}
