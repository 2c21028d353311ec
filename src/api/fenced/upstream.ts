import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";

/**
 * The one Ironic the fenced endpoint forwards to, from `serve --ironic URL`, and nothing
 * else: every request goes to this origin, at this base path, whatever the caller's path
 * says. Credentials in the URL (`http://user:pass@ironic/` for Ironic's http_basic) are the
 * bridge's own: dropped here, so they never ride on a caller's request (the bridge's own
 * calls to Ironic take theirs from `OS_*`, see ironic/keystone.ts).
 */
export class IronicOrigin {
  /** `http:` or `https:` */
  readonly protocol: string;
  readonly hostname: string;
  readonly port: number;
  /** the path Ironic's API is served under ("" at the root), no trailing slash */
  readonly basePath: string;
  /** where Ironic's links point: scheme, host and base path, no credentials */
  readonly linkBase: string;
  /** whether the configured URL carried credentials (dropped: see above) */
  readonly hadCredentials: boolean;

  constructor(configured: string) {
    const url = new URL(configured);
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new Error(`${url.protocol} is not http: or https:`);
    this.protocol = url.protocol;
    this.hostname = url.hostname.replace(/^\[|\]$/g, "");
    this.port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
    this.basePath = url.pathname.replace(/\/+$/, "");
    this.hadCredentials = url.username !== "" || url.password !== "";
    this.linkBase = `${url.protocol}//${url.host}${this.basePath}`;
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
    const send = this.protocol === "https:" ? httpsRequest : httpRequest;
    return send({
      protocol: this.protocol,
      hostname: this.hostname,
      port: this.port,
      method,
      path: `${this.basePath}${path}${query}`,
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
