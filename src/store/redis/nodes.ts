import { randomUUID } from "node:crypto";
import type { RedisClient } from "./connect.js";
import type { BareMetalNode } from "../../core/node.js";
import { hostKey } from "../../core/names.js";
import type { KeyLayout } from "./keys.js";
import { runScript } from "./scripts.js";
import { decodeNode, encodeNode } from "../node-record.js";
import {
  LIST_BUDGET,
  perPlaceLimit,
  type NodeBackend,
  type NodePage,
  type NodeQuery,
  type PreviousPlace,
  type ShardCount,
} from "../ports/nodes.js";

/**
 * Nodes per upsert script. A script blocks Redis while it runs, and lease renewals wait
 * behind it; 1,000 nodes take a few milliseconds, far inside any lease's slack.
 */
const NODES_PER_SCRIPT = 1000;

/** The field of the versions hash that versions the unsharded pool (see nodes-common.lua). */
const POOL_FIELD = "~pool";

/** The node registry in Redis (keys under `{nodes}`, see nodes-common.lua). */
export class RedisNodes implements NodeBackend {
  /**
   * Each page is a round trip and a script call, so small pages cost time: a page of
   * 10,000 nodes answered in 62-67 ms (p50) at 1,000 a call, 77-98 ms at 250. But a
   * 1,000-node reply is decoded and serialised in one turn of the loop: the main thread
   * held it up to 11.4 ms at a time, at 250 at most 5.9-7.2 ms (stall bench). Every renew
   * waits behind the loop; an operator's page of 10,000 can wait 20 ms.
   */
  readonly listPage = 250;
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeyLayout["nodes"],
  ) {}

  private script(name: "nodes-upsert" | "nodes-delete" | "nodes-list", args: Array<string | number>) {
    return runScript(
      this.redis,
      name,
      [this.keys.counts, this.keys.placeVersions],
      [this.keys.prefix, ...args],
    );
  }

  /**
   * Atomic per chunk of NODES_PER_SCRIPT, not across chunks: a store failure in the
   * middle of a large bulk leaves the earlier chunks applied. Upserts are idempotent, so
   * the client's retry of the same request converges.
   */
  async upsert(nodes: BareMetalNode[], expected?: BareMetalNode): Promise<PreviousPlace[] | null> {
    const previous: PreviousPlace[] = [];
    const guard = expected === undefined ? "" : encodeNode(expected);
    for (let i = 0; i < nodes.length; i += NODES_PER_SCRIPT) {
      // A mark new for every call: a registry that lost its mark never gets back one seen before.
      const args: string[] = [guard, randomUUID()];
      for (const node of nodes.slice(i, i + NODES_PER_SCRIPT)) args.push(node.uuid, encodeNode(node));
      // Per node: "~" when new, else its old shard ("" = unsharded); 0 when the guard failed.
      const answer = (await this.script("nodes-upsert", args)) as string[] | 0;
      if (answer === 0) return null;
      for (const old of answer)
        previous.push(old === "~" ? { created: true } : { created: false, shard: old === "" ? null : old });
    }
    return previous;
  }

  async get(uuid: string): Promise<BareMetalNode | null> {
    const record = await this.redis.hget(this.keys.bucket(uuid), uuid);
    return record === null ? null : decodeNode(uuid, record);
  }

  async getMany(uuids: readonly string[]): Promise<Array<BareMetalNode | null>> {
    if (uuids.length === 0) return [];
    const [, ...flat] = (await this.script("nodes-list", ["get", "", 0, ...uuids])) as string[];
    const nodes: Array<BareMetalNode | null> = [];
    for (let i = 0; i < flat.length; i += 2)
      nodes.push(flat[i + 1] === "" ? null : decodeNode(flat[i]!, flat[i + 1]!));
    return nodes;
  }

  async delete(uuid: string): Promise<boolean> {
    return (await this.script("nodes-delete", [uuid])) === 1;
  }

  async list({ source, limit, marker }: NodeQuery): Promise<NodePage> {
    const budget = Math.min(limit, LIST_BUDGET);
    const args: Array<string | number> =
      source.kind === "places"
        ? [
            "places",
            marker ?? "",
            perPlaceLimit(budget, source.places.length),
            ...new Set(source.places.map((p) => p ?? "")),
          ]
        : source.kind === "instance"
          ? [
              "instance",
              marker ?? "",
              budget,
              hostKey(source.host),
              ...(source.versionsOf ?? []).map((p) => p ?? ""),
            ]
          : [source.kind, marker ?? "", budget];
    const [next, ...rest] = (await this.script("nodes-list", args)) as string[];
    // Asked for places' versions (instance only), the answer gives them first, counted.
    const asked = source.kind === "instance" ? source.versionsOf : undefined;
    const counted = asked !== undefined && asked.length > 0 ? Number(rest[0]) : -1;
    const versions = asked === undefined ? {} : { versions: rest.slice(1, 1 + counted).map(Number) };
    const flat = counted < 0 ? rest : rest.slice(1 + counted);
    const nodes: BareMetalNode[] = [];
    for (let i = 0; i < flat.length && nodes.length < limit; i += 2)
      nodes.push(decodeNode(flat[i]!, flat[i + 1]!));
    // The data buckets are read whole, so a page of every node may come back longer than asked.
    if (nodes.length < flat.length / 2) return { nodes, next: nodes[nodes.length - 1]!.uuid, ...versions };
    return { nodes, next: next === "" ? null : next!, ...versions };
  }

  async counts(): Promise<ShardCount[]> {
    const counts = await this.redis.hgetall(this.keys.counts);
    return Object.entries(counts).map(([shard, count]) => ({
      shard: shard === "" ? null : shard,
      count: Number(count),
    }));
  }

  async countOf(shard: string): Promise<number> {
    return Number((await this.redis.hget(this.keys.counts, shard)) ?? 0);
  }

  async placeVersions(places: ReadonlyArray<string | null>): Promise<number[]> {
    if (places.length === 0) return [];
    const versions = await this.redis.hmget(this.keys.placeVersions, ...places.map((p) => p ?? ""));
    return versions.map((v) => Number(v ?? 0));
  }

  async mark(): Promise<string | null> {
    return this.redis.get(this.keys.mark);
  }

  async poolVersion(): Promise<number> {
    return Number((await this.redis.hget(this.keys.placeVersions, POOL_FIELD)) ?? 0);
  }

  /**
   * Move nodes a bridge before the indexed layout stored (one JSON hash, a place hash and
   * a set per place) into this layout, 1,000 at a time, then drop the old keys. Safe to
   * interrupt: the old hash stays until every node is across, and upserting a node that
   * is across already changes nothing, counts included. Answers how many nodes it moved.
   */
  async migrate(): Promise<number> {
    const old = this.keys.legacy;
    if ((await this.redis.exists(old.data)) === 0) return 0;
    let moved = 0;
    let cursor = "0";
    do {
      const [next, flat] = await this.redis.hscan(old.data, cursor, "COUNT", NODES_PER_SCRIPT);
      const nodes: BareMetalNode[] = [];
      for (let i = 1; i < flat.length; i += 2) {
        const stored = JSON.parse(flat[i]!) as Partial<BareMetalNode> & { uuid: string };
        nodes.push({
          uuid: stored.uuid,
          name: stored.name ?? null,
          shard: stored.shard ?? null,
          conductor_group: stored.conductor_group ?? "",
          instance_host: stored.instance_host ?? null,
        });
      }
      if (nodes.length > 0) await this.upsert(nodes);
      moved += nodes.length;
      cursor = next;
    } while (cursor !== "0");
    const places = Object.keys(await this.redis.hgetall(old.counts)).filter((p) => p !== "");
    await this.redis.del(old.place, old.counts, old.unsharded, ...places.map((p) => old.members(p)));
    await this.redis.del(old.data);
    return moved;
  }
}
