import type { RedisClient } from "../redis/connect.js";
import type { KeyLayout } from "../redis/keys.js";
import { runScript, runScriptAcked } from "../redis/scripts.js";
import type { DefinitionBackend, DefinitionWrite, DefinitionWritten } from "./port.js";

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

  write(name: string, key: string, record: string): Promise<DefinitionWrite> {
    return this.run(name, [name, record, key]);
  }

  async remove(name: string, key: string): Promise<DefinitionWritten> {
    // A removal is never refused: only a record's write can meet a name equal but for case.
    return (await this.run(name, [name, "", key])) as DefinitionWritten;
  }

  private async run(name: string, args: string[]): Promise<DefinitionWrite> {
    const keys = [this.keys.records, this.keys.version, this.keys.names];
    if (this.acks === null)
      return outcomeOf((await runScript(this.redis, "definitions-write", keys, args)) as ScriptReply);
    const { reply, acked } = await runScriptAcked(
      this.redis,
      "definitions-write",
      keys,
      args,
      this.acks.replicas,
      this.acks.timeoutMs,
    );
    const outcome = outcomeOf(reply as ScriptReply);
    // A refusal wrote nothing: no replica needs to have it.
    if ("caseTwin" in outcome) return outcome;
    if (acked < this.acks.replicas)
      throw new Error(
        `no replica acknowledged the definition of shard ${name} within ${this.acks.timeoutMs} ms: ` +
          "it may be lost in a failover; write it again",
      );
    return outcome;
  }
}

/** definitions-write.lua's answer: {existed (0/1), version}, or {-1, the name equal to this one but for case}. */
type ScriptReply = [number, number | string];

function outcomeOf([existed, version]: ScriptReply): DefinitionWrite {
  if (existed === -1) return { caseTwin: String(version) };
  return { existed: existed === 1, version: Number(version) };
}
