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
    const node = this.nodeFor(key);
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
   * Keep what a lease script on `key`, sent with `sent` (argsFor's answer then), went by
   * at `nowUs` (the store's clock): `tail` is the end of its reply, empty when it read no
   * lineage, [''] when the reading it was given served on the node it named (confirmed
   * now), or the id, promoted and node it read from INFO.
   */
  learn(
    key: string,
    generation: number,
    sent: readonly [string, ...unknown[]],
    nowUs: number,
    tail: readonly unknown[],
  ): void {
    if (generation !== this.generation || tail.length === 0) return;
    const node = tail.length === 1 ? sent[0] : (tail[2] as string);
    const kept = this.byNode.get(node);
    if (tail.length === 1) {
      if (kept !== undefined) kept.confirmedUs = Math.max(kept.confirmedUs, nowUs);
      return;
    }
    const [id, promoted] = tail as [string, string];
    if (this.cluster) this.nodeOfKey.set(key, node);
    if (kept !== undefined && kept.id === id && kept.promoted === promoted)
      kept.confirmedUs = Math.max(kept.confirmedUs, nowUs);
    else this.byNode.set(node, { id, promoted, confirmedUs: nowUs });
  }

  /** The node a script on `key` is sent to by what this client knows ('' off a Cluster, '?' unknown). */
  private nodeFor(key: string): string {
    return this.cluster ? (this.nodeOfKey.get(key) ?? "?") : "";
  }
}

interface Reading {
  id: string;
  promoted: string;
  confirmedUs: number;
}
