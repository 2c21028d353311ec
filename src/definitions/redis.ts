import type { RedisClient } from "../redis/connect.js";
import type { KeyLayout } from "../redis/keys.js";
import { runScript, runScriptAcked } from "../redis/scripts.js";
import type { DefinitionBackend } from "./port.js";

/**
 * Shard definitions in Redis (keys under `{definitions}`). On a replicated store a write
 * is answered as done only once a replica has it, as lease writes are: a definition that
 * a failover forgets (a shard's `filling` mark among them) would change who is in nova's
 * legacy pool behind the operator's back.
 */
export class RedisDefinitions implements DefinitionBackend {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeyLayout["definitions"],
    private readonly acks: { replicas: number; timeoutMs: number } | null,
  ) {}

  async version(): Promise<number> {
    return Number((await this.redis.get(this.keys.version)) ?? 0);
  }

  async list(): Promise<{ version: number; records: Map<string, string> }> {
    // One transaction, so the records are the ones the version names.
    const [[, version], [, records]] = (await this.redis
      .multi()
      .get(this.keys.version)
      .hgetall(this.keys.records)
      .exec()) as [[null, string | null], [null, Record<string, string>]];
    return { version: Number(version ?? 0), records: new Map(Object.entries(records)) };
  }

  async write(name: string, record: string | null): Promise<{ existed: boolean; version: number }> {
    const keys = [this.keys.records, this.keys.version];
    const args = [name, record ?? ""];
    if (this.acks === null) {
      const [existed, version] = (await runScript(this.redis, "definitions-write", keys, args)) as number[];
      return { existed: existed === 1, version: version! };
    }
    const { reply, acked } = await runScriptAcked(
      this.redis,
      "definitions-write",
      keys,
      args,
      this.acks.replicas,
      this.acks.timeoutMs,
    );
    if (acked < this.acks.replicas)
      throw new Error(
        `no replica acknowledged the definition of shard ${name} within ${this.acks.timeoutMs} ms: ` +
          "it may be lost in a failover; write it again",
      );
    const [existed, version] = reply as number[];
    return { existed: existed === 1, version: version! };
  }
}
