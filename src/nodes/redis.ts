import type { Redis } from "ioredis";
import type { BareMetalNode } from "../domain/node.js";
import type { KeyLayout } from "../store/redis/keys.js";
import { runScript } from "../store/redis/scripts.js";
import {
  pageOf,
  type NodeBackend,
  type NodeFilter,
  type NodePage,
  type PreviousPlace,
  type ShardCount,
} from "./port.js";

/**
 * Nodes per upsert script. A script blocks Redis while it runs, and lease renewals wait
 * behind it; 1,000 nodes take a few milliseconds, far inside any lease's slack.
 */
const NODES_PER_SCRIPT = 1000;

/**
 * A node as stored: its fields in one fixed order, so that equal nodes are equal strings
 * (the compare-and-set of nodes-upsert.lua compares them).
 */
function encodeNode(node: BareMetalNode): string {
  const { uuid, name, shard, conductor_group, instance_host } = node;
  return JSON.stringify({ uuid, name, shard, conductor_group, instance_host });
}

/** The node registry in Redis (keys under `{nodes}`, see keys.ts; scripts nodes-*.lua). */
export class RedisNodes implements NodeBackend {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeyLayout["nodes"],
  ) {}

  private get scriptKeys(): string[] {
    return [this.keys.data, this.keys.place, this.keys.counts];
  }

  /**
   * Atomic per chunk of NODES_PER_SCRIPT, not across chunks: a store failure in the
   * middle of a large bulk leaves the earlier chunks applied. Upserts are idempotent, so
   * the client's retry of the same request converges.
   */
  async upsert(nodes: BareMetalNode[], expected?: BareMetalNode): Promise<PreviousPlace[] | null> {
    const previous: PreviousPlace[] = [];
    for (let i = 0; i < nodes.length; i += NODES_PER_SCRIPT) {
      const guard = expected === undefined ? "" : encodeNode(expected);
      const args: string[] = [this.keys.membersPrefix, this.keys.unsharded, guard];
      for (const node of nodes.slice(i, i + NODES_PER_SCRIPT)) {
        args.push(node.uuid, node.shard ?? "", encodeNode(node));
      }
      // Per node: "~" when new, else its old place ("" = unsharded); 0 when the guard
      // did not hold (see nodes-upsert.lua).
      const answer = (await runScript(this.redis, "nodes-upsert", this.scriptKeys, args)) as string[] | 0;
      if (answer === 0) return null;
      for (const old of answer) {
        previous.push(old === "~" ? { created: true } : { created: false, shard: old === "" ? null : old });
      }
    }
    return previous;
  }

  async get(uuid: string): Promise<BareMetalNode | null> {
    const json = await this.redis.hget(this.keys.data, uuid);
    return json === null ? null : (JSON.parse(json) as BareMetalNode);
  }

  async delete(uuid: string): Promise<boolean> {
    const args = [this.keys.membersPrefix, this.keys.unsharded, uuid];
    return (await runScript(this.redis, "nodes-delete", this.scriptKeys, args)) === 1;
  }

  private async candidates(filter: NodeFilter): Promise<string[]> {
    if (filter.shards !== undefined) {
      if (filter.shards.length === 0) return [];
      return this.redis.sunion(...filter.shards.map((shard) => this.keys.members(shard)));
    }
    if (filter.sharded === false) return this.redis.smembers(this.keys.unsharded);
    if (filter.sharded === true) {
      const shards = (await this.counts()).flatMap((c) => (c.shard === null ? [] : [c.shard]));
      return shards.length === 0 ? [] : this.redis.sunion(...shards.map((shard) => this.keys.members(shard)));
    }
    return this.redis.hkeys(this.keys.place);
  }

  async list(filter: NodeFilter): Promise<NodePage> {
    const page = pageOf(await this.candidates(filter), filter);
    if (page.uuids.length === 0) return { nodes: [], next: null };
    const json = await this.redis.hmget(this.keys.data, ...page.uuids);
    // A node deleted between the two reads is skipped rather than returned half-known.
    const nodes = json.flatMap((j) => (j === null ? [] : [JSON.parse(j) as BareMetalNode]));
    return { nodes, next: page.next };
  }

  async counts(): Promise<ShardCount[]> {
    const counts = await this.redis.hgetall(this.keys.counts);
    return Object.entries(counts).map(([shard, count]) => ({
      shard: shard === "" ? null : shard,
      count: Number(count),
    }));
  }
}
