import type { Redis } from "ioredis";
import { runScript } from "../store/redis/scripts.js";
import { EMPTY_TRAIT_RECORD, type TraitBackend, type TraitRecord } from "./store-port.js";

/** Traits in Redis: one hash per node under the `{nodes}` hash tag, committed by CAS. */
export class RedisTraits implements TraitBackend {
  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
  ) {}

  private key(uuid: string): string {
    return `${this.namespace}:{nodes}:traits:${uuid}`;
  }

  async read(uuid: string): Promise<TraitRecord> {
    const json = await this.redis.hget(this.key(uuid), "record");
    return json === null ? structuredClone(EMPTY_TRAIT_RECORD) : (JSON.parse(json) as TraitRecord);
  }

  async commit(uuid: string, expected: number, next: TraitRecord): Promise<boolean> {
    const args = [String(expected), JSON.stringify(next), String(next.generation)];
    return (await runScript(this.redis, "traits-commit", this.key(uuid), args)) === 1;
  }

  async delivery(id: string): Promise<string | null> {
    return this.redis.get(`${this.namespace}:delivery:${id}`);
  }

  async recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(`${this.namespace}:delivery:${id}`, outcome, "EX", ttlSeconds);
  }
}
