import { connect, createServer, type Server, type Socket } from "node:net";
import { freePort } from "./free-port.js";

const HOST = "127.0.0.1";

/**
 * A TCP forwarder on a loopback port of its own: what it accepts, it connects to the
 * current target and pipes both ways. `moveTo` is a virtual IP moving, or a proxy that
 * follows the Redis master switching: the connections open to the old target break (as a
 * dead master's do), new ones reach the new target; with no target, every connection is
 * closed at once (nothing answers at the address).
 */
export class Forwarder {
  private target: number | null;
  private readonly open = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    target: number,
  ) {
    this.target = target;
    server.on("connection", (client) => this.forward(client));
  }

  static async start(target: number): Promise<Forwarder> {
    const port = await freePort();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, HOST, () => resolve());
    });
    return new Forwarder(server, port, target);
  }

  private forward(client: Socket): void {
    if (this.target === null) {
      client.destroy();
      return;
    }
    const upstream = connect(this.target, HOST);
    const both = [client, upstream];
    for (const socket of both) {
      this.open.add(socket);
      // One side gone (the master killed, the bridge closing): the other goes too.
      socket.once("close", () => {
        this.open.delete(socket);
        for (const other of both) other.destroy();
      });
      socket.on("error", () => socket.destroy());
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Lead new connections to `target` (null: nowhere), and break the ones open. */
  moveTo(target: number | null): void {
    this.target = target;
    for (const socket of [...this.open]) socket.destroy();
  }

  async close(): Promise<void> {
    this.moveTo(null);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
