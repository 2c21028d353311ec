import { randomUUID } from "node:crypto";
import { leaseConnectionOptions } from "./redis/connection.js";
import { closeClient, keepConnected, redisClient, type RedisTopology } from "./redis/connect.js";
import type { LeaseChanges } from "./lease-changes.js";

/**
 * Tell the other bridges on one Redis of this bridge's releases, and this bridge of
 * theirs: a PUBLISH on `NAMESPACE:lease-released` after each release that succeeded
 * (sent from here, after the script: the Lua scripts stay as they are), heard on a
 * connection of its own that does nothing but SUBSCRIBE. Plain pub/sub reaches every
 * subscriber on a single server, on a Sentinel-managed master (ioredis subscribes again
 * on the new master after a failover) and on every node of a Cluster (the bus carries
 * PUBLISH to all). It is fire and forget: a message published while a subscriber
 * reconnects is lost to it, which costs that bridge's waiters the wake, not the lease —
 * they are woken by their timer at the lease's end, or answered at the end of their wait.
 * Keyspace notifications would announce expiries too, but they are off by default, often
 * disabled on managed Redis, and an expiry is found at the lease's end anyway.
 */
export async function announceThroughRedis(
  changes: LeaseChanges,
  topology: RedisTopology,
  namespace = "sb",
  commandTimeoutMs = 2000,
): Promise<() => void> {
  const channel = `${namespace}:lease-released`;
  // Each message names its bridge, so that a bridge does not wake its own waiters twice.
  const origin = randomUUID();
  const options = leaseConnectionOptions(commandTimeoutMs);
  const publisher = redisClient(topology, options);
  // The subscriber queues its SUBSCRIBE until connected, and subscribes again after every reconnect.
  const subscriber = redisClient(topology, { ...options, enableOfflineQueue: true, autoResubscribe: true });
  let closed = false;
  for (const client of [publisher, subscriber]) {
    client.on("error", () => undefined); // reconnects are reported as errors; nothing to do with them
    keepConnected(client, () => closed);
  }
  await Promise.all([publisher.connect(), subscriber.connect()]).catch((error: unknown) => {
    closed = true;
    closeClient(publisher);
    closeClient(subscriber);
    throw error;
  });
  subscriber.on("message", (from: string, message: string) => {
    if (from !== channel) return;
    const space = message.indexOf(" ");
    if (space > 0 && message.slice(0, space) !== origin) changes.heard(message.slice(space + 1));
  });
  await subscriber.subscribe(channel);
  changes.relayTo((shard) => void publisher.publish(channel, `${origin} ${shard}`).catch(() => undefined));
  return () => {
    closed = true;
    closeClient(publisher);
    closeClient(subscriber);
  };
}
