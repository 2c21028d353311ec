import {
  createServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";

/** One request as it reached the recording proxy, and what the upstream answered. */
export interface RecordedRequest {
  method: string;
  /** path and query, as forwarded */
  path: string;
  /** its X-Auth-Token, or null when it had none */
  token: string | null;
  /** its Authorization header, or null when it had none */
  authorization: string | null;
  /** every header it came with */
  headers: IncomingHttpHeaders;
  /** its body, as it reached the service */
  body: string;
  status: number;
}

/**
 * A plain forwarding HTTP proxy in front of a real service (Ironic): every request goes on
 * unchanged — method, path, headers (Host too, so the service's links name the proxy) and
 * body — and the answer comes back unchanged; the proxy only writes down each request's
 * method, path, X-Auth-Token and the status answered. Not a stand-in: what is answered is
 * the service's.
 */
export class RecordingProxy {
  readonly requests: RecordedRequest[] = [];
  /** where to send the calls meant for the service */
  url = "";
  /**
   * A fault: the service's answers to these methods never end — each is passed on, then
   * bytes follow it at 5 MB/s until the caller hangs up (an answer a proxy must not
   * buffer whole).
   */
  endless: ReadonlySet<string> = new Set();
  /** answers the caller hung up on before their end, endless ones included */
  abandoned = 0;
  private readonly server: Server;

  private constructor(
    private readonly upstream: URL,
    /** a path the service is served under here, as a web server in front of it does (devstack's `/baremetal`) */
    private readonly prefix: string,
  ) {
    this.server = createServer((req, res) => this.forward(req, res));
  }

  static async start(upstream: string, options: { prefix?: string } = {}): Promise<RecordingProxy> {
    const proxy = new RecordingProxy(new URL(upstream), options.prefix ?? "");
    await new Promise<void>((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    proxy.url = `http://127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
    return proxy;
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const token = req.headers["x-auth-token"];
    const path = req.url ?? "/";
    if (!path.startsWith(`${this.prefix}/`)) {
      res.writeHead(404).end(`not under ${this.prefix}/`);
      return;
    }
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path: req.url ?? "/",
      token: typeof token === "string" ? token : null,
      authorization: req.headers.authorization ?? null,
      headers: req.headers,
      body: "",
      status: 0,
    };
    req.on("data", (chunk: Buffer) => (record.body += chunk.toString("utf8")));
    res.once("close", () => {
      if (!res.writableFinished) this.abandoned++;
    });
    const out = request(
      {
        host: this.upstream.hostname,
        port: this.upstream.port,
        method: req.method,
        path: path.slice(this.prefix.length),
        headers: req.headers,
      },
      (answer) => {
        record.status = answer.statusCode ?? 0;
        this.requests.push(record);
        if (!this.endless.has(record.method)) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        const { "content-length": _length, ...headers } = answer.headers;
        res.writeHead(answer.statusCode ?? 502, headers);
        answer.pipe(res, { end: false });
        answer.once("end", () => {
          const more = setInterval(() => res.write(" ".repeat(25_000)), 5);
          res.once("close", () => clearInterval(more));
        });
      },
    );
    out.on("error", (error) => {
      record.status = 502;
      this.requests.push(record);
      res.writeHead(502).end(String(error));
    });
    req.pipe(out);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
