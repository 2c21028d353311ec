import { lookup } from "node:dns/promises";
import { isIP, type Socket } from "node:net";
import { Redis } from "ioredis";

/**
 * Leave a Sentinel-managed master the moment a sentinel names another (`+switch-master`),
 * and say which commands that cut off.
 *
 * ioredis's own failover detector ends the connection gracefully (FIN) and destroys it
 * only `disconnectTimeout` (2 s) later: a frozen master never answers the FIN, so what
 * was in flight on it waited out that timeout before the client asked the sentinels
 * again (#45), and its replies could still arrive from the old master thawed before its
 * demotion. By its code it also leaves the new master when a sentinel announces the
 * switch late (the failover's leader does, up to a second after the others), and on a
 * switch of any master the sentinels watch. Here the socket is destroyed at once —
 * nothing more is read from the old master — and only on a switch of this client's
 * master to a server it is not connected to; ioredis then asks the sentinels again (its
 * retryStrategy).
 *
 * The sentinels listened to are the ones the spec names, each on a connection of its
 * own that subscribes again after any reconnect.
 */
export function leaveOnSwitch(client: Redis): () => void {
  const { sentinels, name, sentinelPassword } = client.options;
  const listeners = (sentinels ?? []).map(
    (sentinel) =>
      new Redis({
        host: sentinel.host ?? "127.0.0.1",
        port: sentinel.port ?? 26379,
        ...(sentinelPassword !== undefined && { password: sentinelPassword }),
        enableReadyCheck: false,
        connectTimeout: SENTINEL_CONNECT_MS,
        // A sentinel that went away is looked for again, every second at most.
        retryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
        maxRetriesPerRequest: null,
      }),
  );
  for (const listener of listeners) {
    listener.on("error", () => undefined); // a sentinel down: reconnects are reported as errors
    listener.on("message", (_channel: string, message: string) => {
      // "<master name> <old ip> <old port> <new ip> <new port>"
      const [master, , , newHost, newPort] = message.split(" ");
      if (master === name && newHost !== undefined)
        void leaveUnlessOn(client, newHost, Number(newPort)).catch(() => undefined);
    });
    listener.subscribe(SWITCH_CHANNEL).catch(() => undefined);
  }
  return () => {
    for (const listener of listeners) listener.disconnect();
  };
}

const SWITCH_CHANNEL = "+switch-master";
/** How long a sentinel may take to accept the listener's connection before it is tried again. */
const SENTINEL_CONNECT_MS = 1000;

/** How many times each client left a master on a switch (see abandonedSince). */
const leaves = new WeakMap<Redis, number>();

/**
 * A mark to take before sending a command on `client`: abandonedSince(client, mark) says
 * later whether a switch cut the connection off since.
 */
export const switchMark = (client: Redis): number => leaves.get(client) ?? 0;

/** Whether `client` left a master on a switch since `mark` (switchMark) was taken. */
export const abandonedSince = (client: Redis, mark: number): boolean => switchMark(client) !== mark;

/**
 * Destroy the connection unless it is to the master just named: a connection being set
 * up (ready check pending) too, since ioredis may have been told the old master just
 * before the switch.
 */
async function leaveUnlessOn(client: Redis, host: string, port: number): Promise<void> {
  const stream = client.stream as Socket | undefined;
  if (stream === undefined || (client.status !== "ready" && client.status !== "connect")) return;
  if (stream.remotePort === port && (await addressesOf(host)).includes(plainAddress(stream.remoteAddress)))
    return;
  // Looked up again: a name's lookup may have yielded to a reconnect.
  if (client.stream !== stream || stream.destroyed) return;
  leaves.set(client, switchMark(client) + 1);
  stream.destroy();
}

/** The addresses `host` stands for: itself when it is one (sentinels announce addresses unless told otherwise). */
async function addressesOf(host: string): Promise<string[]> {
  if (isIP(host) !== 0) return [host];
  return (await lookup(host, { all: true })).map((entry) => entry.address);
}

/** An IPv4 address as itself, not IPv4-mapped IPv6 (a dual-stack socket's remoteAddress). */
const plainAddress = (address: string | undefined): string => (address ?? "").replace(/^::ffff:/, "");

/**
 * Until `client` is ready again or `untilMs` (performance.now) passes: whether it is.
 * For a command cut off by a switch, to be sent again to the new master.
 */
export async function readyBy(client: Redis, untilMs: number): Promise<boolean> {
  const waitMs = untilMs - performance.now();
  if (waitMs <= 0) return false;
  if (client.status === "ready") return true;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), waitMs);
  });
  try {
    return await Promise.race([nextReady(client), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Each client's next "ready", one listener however many commands wait for it. */
const readyAgain = new WeakMap<Redis, Promise<boolean>>();

function nextReady(client: Redis): Promise<boolean> {
  let ready = readyAgain.get(client);
  if (ready === undefined) {
    ready = new Promise((resolve) =>
      client.once("ready", () => {
        readyAgain.delete(client);
        resolve(true);
      }),
    );
    readyAgain.set(client, ready);
  }
  return ready;
}
