import { Cluster, type Redis } from "ioredis";
import type { RedisClient } from "./connect.js";

/**
 * What a connection's lease scripts last read of their server's lineage (the replication
 * id, promoted or not), handed to the next script so that it need not read INFO again
 * (store_lineage in clock-server.lua says when the script takes it and why that is safe).
 * Off a Cluster one reading per client; on a Cluster one per node, found through the node
 * the key's last reply came from, and checked by the script against CLUSTER MYID. Every
 * reading is dropped when any of the client's connections closes: a restarted server keeps
 * its address (and on a Cluster its node id) but not its replication id.
 */
export class LineageReadings {
  private readonly byNode = new Map<string, Reading>();
  /** on a Cluster: the node each key's last reply came from */
  private readonly nodeOfKey = new Map<string, string>();
  /** bumped when the readings are dropped: a reply sent before that teaches nothing */
  private generation = 0;
  private readonly cluster: boolean;

  private constructor(redis: RedisClient) {
    this.cluster = redis instanceof Cluster;
    const forget = () => this.forget();
    if (redis instanceof Cluster) {
      redis.on("+node", (node: Redis) => node.on("close", forget));
      for (const node of redis.nodes()) node.on("close", forget);
    } else redis.on("close", forget);
  }

  private static readonly ofClient = new WeakMap<RedisClient, LineageReadings>();

  /** The readings kept for `redis` (one set per client, whatever uses it). */
  static of(redis: RedisClient): LineageReadings {
    let readings = LineageReadings.ofClient.get(redis);
    if (readings === undefined) {
      readings = new LineageReadings(redis);
      LineageReadings.ofClient.set(redis, readings);
    }
    return readings;
  }

  /** The four arguments a lease script on `key` ends with: node, promoted, id, confirmed (store µs). */
  argsFor(key: string): [string, string, string, number] {
    const node = this.cluster ? (this.nodeOfKey.get(key) ?? "?") : "";
    const reading = this.byNode.get(node);
    if (reading === undefined) return [node, "0", "", 0];
    return [node, reading.promoted, reading.id, reading.confirmedUs];
  }

  /**
   * Drop every reading: a lease script failed (a replica refuses them: this server may be
   * one now), so the next script reads INFO.
   */
  forget(): void {
    this.generation++;
    this.byNode.clear();
  }

  /** The generation to hand to `learn` with the reply of a script sent now. */
  get current(): number {
    return this.generation;
  }

  /**
   * Keep what a lease script on `key` went by (the reply's last three fields: id,
   * promoted, node) and when it ran (`nowUs`, the store's clock).
   */
  learn(key: string, generation: number, nowUs: number, tail: readonly unknown[]): void {
    const [id, promoted, node] = tail as [string, string, string];
    if (generation !== this.generation || id === "" || id === undefined) return;
    if (this.cluster) this.nodeOfKey.set(key, node);
    const kept = this.byNode.get(node);
    if (kept !== undefined && kept.id === id && kept.promoted === promoted) kept.confirmedUs = nowUs;
    else this.byNode.set(node, { id, promoted, confirmedUs: nowUs });
  }
}

interface Reading {
  id: string;
  promoted: string;
  confirmedUs: number;
}
