import { connect, type Socket } from "node:net";
import type { BridgeRequest, BridgeTransport } from "../../src/agent/bridge-client.js";

/**
 * A lean HTTP/1.1 client for load that one process offers on behalf of thousands of agents:
 * keep-alive sockets, one request on a socket at a time (as each agent's own client does),
 * answers read by their Content-Length or chunks. node:http's client cost the scale bench's
 * load process a core at ~7,000 requests a second, so that the bench measured its own
 * event loop instead of the bridge's (docs/PERFORMANCE-LOG.md); this one writes a request in one
 * write and parses only the status line, two headers and the body.
 */

export interface Answer {
  status: number;
  body: string;
  /** when the request was handed to the pool, and when its answer had all arrived */
  sentAt: number;
  doneAt: number;
}

interface Pending {
  head: string;
  body: Buffer | undefined;
  timeoutMs: number;
  sentAt: number;
  resolve: (answer: Answer) => void;
  reject: (error: Error) => void;
}

const HEADER_END = Buffer.from("\r\n\r\n");

/** What one socket has read of the answer it waits for. */
class Reader {
  /** the bytes read and not yet part of an answer */
  private pending: Buffer = Buffer.alloc(0);
  private status = 0;
  /** bytes of body to read (Content-Length), or -1 for chunked, or -2 before the head */
  private length = -2;
  private closeAfter = false;

  /** Feed bytes; the answer once whole (then the reader is ready for the next one). */
  push(data: Buffer): { status: number; body: Buffer; close: boolean } | undefined {
    this.pending = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    if (this.length === -2 && !this.readHead()) return undefined;
    const body = this.length >= 0 ? this.fixedBody(this.pending) : this.chunkedBody(this.pending);
    if (body === undefined) return undefined;
    const answer = { status: this.status, body, close: this.closeAfter };
    this.pending = Buffer.alloc(0);
    this.length = -2;
    this.closeAfter = false;
    return answer;
  }

  private readHead(): boolean {
    const end = this.pending.indexOf(HEADER_END);
    if (end < 0) return false;
    const head = this.pending.toString("latin1", 0, end).toLowerCase();
    this.status = Number(head.slice(9, 12));
    const length = /\r\ncontent-length: *(\d+)/.exec(head);
    this.length = length !== null ? Number(length[1]) : /\r\ntransfer-encoding: *chunked/.test(head) ? -1 : 0;
    this.closeAfter = /\r\nconnection: *close/.test(head);
    this.pending = this.pending.subarray(end + 4);
    return true;
  }

  private fixedBody(all: Buffer): Buffer | undefined {
    return all.length >= this.length ? all.subarray(0, this.length) : undefined;
  }

  private chunkedBody(all: Buffer): Buffer | undefined {
    const parts: Buffer[] = [];
    for (let at = 0; ;) {
      const line = all.indexOf("\r\n", at);
      if (line < 0) return undefined;
      const size = parseInt(all.toString("latin1", at, line), 16);
      // the last chunk, then the empty line that ends the (trailer-less) answer
      if (size === 0) return all.length >= line + 4 ? Buffer.concat(parts) : undefined;
      if (all.length < line + 2 + size + 2) return undefined;
      parts.push(all.subarray(line + 2, line + 2 + size));
      at = line + 2 + size + 2;
    }
  }
}

/** What a connection tells its pool: answered (and whether it may carry another), or lost. */
interface ConnectionEvents {
  answered(connection: Connection, reusable: boolean): void;
  lost(connection: Connection): void;
}

/** A connection carrying one request at a time. */
class Connection {
  readonly socket: Socket;
  private readonly reader = new Reader();
  private current: Pending | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** told the pool it is gone (each connection ends once) */
  private ended = false;

  constructor(
    host: string,
    port: number,
    private readonly events: ConnectionEvents,
  ) {
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on("data", (data: Buffer) => this.onData(data));
    this.socket.on("error", (error) => this.fail(error));
    // The server closes a keep-alive connection idle past its timeout (Node's: 5 s).
    this.socket.on("close", () => this.fail(new Error("read ECONNRESET")));
  }

  send(request: Pending): void {
    this.current = request;
    this.timer = setTimeout(
      () => this.fail(new Error(`timeout after ${request.timeoutMs} ms`)),
      request.timeoutMs,
    );
    this.socket.write(
      request.body === undefined ? request.head : Buffer.concat([Buffer.from(request.head), request.body]),
    );
  }

  private onData(data: Buffer): void {
    const answer = this.reader.push(data);
    const request = this.current;
    if (answer === undefined || request === undefined) return;
    this.current = undefined;
    clearTimeout(this.timer);
    if (answer.close) {
      this.ended = true;
      this.socket.destroy();
    }
    request.resolve({
      status: answer.status,
      body: answer.body.toString("utf8"),
      sentAt: request.sentAt,
      doneAt: performance.now(),
    });
    this.events.answered(this, !answer.close);
  }

  private fail(error: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.socket.destroy();
    const request = this.current;
    this.current = undefined;
    clearTimeout(this.timer);
    request?.reject(error);
    this.events.lost(this);
  }
}

/** Keep-alive connections to one server, at most `maxSockets`; requests beyond them queue. */
export class KeepAlivePool implements ConnectionEvents {
  private readonly idle = new Set<Connection>();
  private readonly queue: Pending[] = [];
  private readonly connections = new Set<Connection>();
  private destroyed = false;

  constructor(
    private readonly server: () => { host: string; port: number },
    private readonly maxSockets: number,
    /** a request's timeout unless it gives its own */
    private readonly timeoutMs: number,
  ) {}

  /** Requests waiting for a connection now. */
  get queued(): number {
    return this.queue.length;
  }

  request(
    method: string,
    path: string,
    bearer: string,
    body?: string,
    timeoutMs = this.timeoutMs,
  ): Promise<Answer> {
    const sentAt = performance.now();
    const bytes = body === undefined ? undefined : Buffer.from(body);
    const { host, port } = this.server();
    const head =
      `${method} ${path} HTTP/1.1\r\nhost: ${host}:${port}\r\nauthorization: Bearer ${bearer}\r\n` +
      (bytes === undefined
        ? "\r\n"
        : `content-type: application/json\r\ncontent-length: ${bytes.length}\r\n\r\n`);
    return new Promise((resolve, reject) => {
      if (this.destroyed) return reject(new Error("pool destroyed"));
      const pending = { head, body: bytes, timeoutMs, sentAt, resolve, reject };
      const connection = this.takeIdle() ?? this.connect();
      if (connection === undefined) this.queue.push(pending);
      else connection.send(pending);
    });
  }

  destroy(): void {
    this.destroyed = true;
    this.closeAll();
  }

  /** Close every connection: the requests they carry and those queued fail (the pool stays usable). */
  closeAll(): void {
    for (const pending of this.queue.splice(0)) pending.reject(new Error("pool closed"));
    for (const connection of this.connections) connection.socket.destroy();
  }

  answered(connection: Connection, reusable: boolean): void {
    if (!reusable) this.connections.delete(connection);
    if (this.destroyed) return void connection.socket.destroy();
    const next = this.queue.shift();
    if (next === undefined) {
      if (reusable) this.idle.add(connection);
      return;
    }
    (reusable ? connection : this.connect())!.send(next);
  }

  lost(connection: Connection): void {
    this.connections.delete(connection);
    this.idle.delete(connection);
    const next = this.destroyed ? undefined : this.queue.shift();
    if (next !== undefined) this.connect()!.send(next);
  }

  private takeIdle(): Connection | undefined {
    for (const connection of this.idle) {
      this.idle.delete(connection);
      return connection;
    }
    return undefined;
  }

  private connect(): Connection | undefined {
    if (this.connections.size >= this.maxSockets) return undefined;
    const { host, port } = this.server();
    const connection = new Connection(host, port, this);
    this.connections.add(connection);
    return connection;
  }
}

/**
 * A BridgeClient's transport over keep-alive pools: the agents' own client and keeper,
 * on the pools' sockets. `poolFor` picks each request's pool: a request that may wait at
 * the bridge (a waiting acquire) must not hold up renews queued behind it on a shared socket.
 */
export function poolTransport(poolFor: (request: BridgeRequest) => KeepAlivePool): BridgeTransport {
  return async (request) => {
    const { method, path, token, body, timeoutMs } = request;
    const answer = await poolFor(request).request(method, path, token, body, timeoutMs);
    return { status: answer.status, text: answer.body };
  };
}
