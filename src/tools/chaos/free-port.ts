import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** Inclusive bounds of a span of TCP ports. */
export interface PortSpan {
  readonly low: number;
  readonly high: number;
}

/**
 * Ports under this floor are left to the machine's own services (MariaDB, RabbitMQ,
 * keystone, etcd...); the span handed out runs from here to just under the kernel's
 * ephemeral range.
 */
const LISTENER_FLOOR = 20_000;
/** A span narrower than this would make collisions between probes likely: use the kernel's pick. */
const LEAST_SPAN = 1_000;
const ATTEMPTS = 200;
/** Ports this process has handed out: two servers started side by side must not share one. */
const handedOut = new Set<number>();

/** The kernel's ephemeral range, from the text of /proc/sys/net/ipv4/ip_local_port_range. */
export function parseEphemeralRange(text: string): PortSpan | null {
  const match = /^\s*(\d+)\s+(\d+)\s*$/.exec(text);
  if (match === null) return null;
  const low = Number(match[1]);
  const high = Number(match[2]);
  return low > 0 && low <= high && high <= 65_535 ? { low, high } : null;
}

/** Where a listener's port is picked: under the ephemeral range, or null if that leaves too little. */
export function listenerSpan(ephemeral: PortSpan | null): PortSpan | null {
  if (ephemeral === null) return null;
  const span = { low: LISTENER_FLOOR, high: ephemeral.low - 1 };
  return span.high - span.low + 1 >= LEAST_SPAN ? span : null;
}

function readEphemeralRange(): PortSpan | null {
  try {
    return parseEphemeralRange(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"));
  } catch {
    return null;
  }
}

/** Whether a loopback listener can bind `port` now (0: any port; resolves to the one bound, or null). */
function probe(port: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) =>
      error.code === "EADDRINUSE" || error.code === "EACCES" ? resolve(null) : reject(error),
    );
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : null));
    });
  });
}

/**
 * A loopback port for a server the tests or `shardbridge chaos` start, free when probed.
 *
 * Why not listen(0): the kernel picks from its ephemeral range, the same range it gives
 * to every outgoing connection. Between this probe and the server's own bind, a service
 * starting beside it (its connections to MariaDB, RabbitMQ, keystone) can be handed that
 * very port, and the server fails with EADDRINUSE (CI saw Ironic fail that way). A port
 * under the ephemeral range is never given to an outgoing connection, so only another
 * listener can take it, and this process hands each one out once.
 */
export async function freePort(): Promise<number> {
  const span = listenerSpan(readEphemeralRange());
  if (span !== null) return pickListenerPort(span, Math.random, handedOut);
  const port = await probe(0);
  if (port === null) throw new Error("the kernel gave no free port");
  return port;
}

/** A port of `span` that no listener holds and `handedOut` does not hold, drawn by `random`; added to `handedOut`. */
export async function pickListenerPort(
  span: PortSpan,
  random: () => number,
  handedOut: Set<number>,
): Promise<number> {
  const size = span.high - span.low + 1;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const port = span.low + Math.min(size - 1, Math.floor(random() * size));
    if (handedOut.has(port)) continue;
    if ((await probe(port)) === null) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port in ${span.low}-${span.high} after ${ATTEMPTS} tries`);
}
