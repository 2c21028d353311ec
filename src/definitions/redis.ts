import { randomUUID } from "node:crypto";
import type { RedisClient } from "../redis/connect.js";
import type { KeyLayout } from "../redis/keys.js";
import { volatilityOf } from "../redis/persistence.js";
import { runScript, runScriptAcked, type ScriptName } from "../redis/scripts.js";
import type { DefinitionBackend, DefinitionEntry, DefinitionsRead, DefinitionsSeen } from "./port.js";

/**
 * A mark for a store that has none: new for every call, so a store that lost its mark
 * never gets back one a bridge saw before (not even from the bridge that first set it).
 */
const freshMark = (): string => randomUUID();

/**
 * Shard definitions in Redis (keys under `{definitions}`, one slot). On a replicated store
 * a write is answered as done only once a replica has it, as lease writes are: a
 * definition that a failover forgets (a shard's `filling` mark among them) would change
 * who is in nova's legacy pool behind the operator's back.
 */
export class RedisDefinitions implements DefinitionBackend {
  private readonly keyList: string[];

  constructor(
    private readonly redis: RedisClient,
    keys: KeyLayout["definitions"],
    private readonly acks: { replicas: number; timeoutMs: number } | null,
  ) {
    this.keyList = [keys.records, keys.version, keys.changes, keys.mark];
  }

  async read(seen: DefinitionsSeen): Promise<DefinitionsRead> {
    const reply = (await runScript(this.redis, "definitions-read", this.keyList, [
      seen.mark ?? "",
      String(seen.version),
    ])) as string[];
    const entries = new Map<string, DefinitionEntry>();
    for (let i = 3; i < reply.length; i += 3)
      entries.set(reply[i]!, { version: Number(reply[i + 1]), record: reply[i + 2] || null });
    return { version: Number(reply[0]), mark: reply[1] || null, whole: Number(reply[2]) === 1, entries };
  }

  async write(name: string, record: string | null): Promise<{ existed: boolean; version: number }> {
    const [existed, version] = (await this.run(
      "definitions-write",
      [name, record ?? "", freshMark()],
      name,
    )) as [number, number];
    return { existed: existed === 1, version };
  }

  async restore(copy: ReadonlyMap<string, DefinitionEntry>): Promise<{ restored: number }> {
    const args: string[] = [freshMark()];
    for (const [name, { version, record }] of copy) args.push(name, String(version), record ?? "");
    return { restored: Number(await this.run("definitions-restore", args, `${copy.size} definitions`)) };
  }

  volatility(): Promise<string | null> {
    return volatilityOf(this.redis);
  }

  /** A write script, acknowledged by a replica on a replicated store; `what` names it in the error. */
  private async run(name: ScriptName, args: string[], what: string): Promise<unknown> {
    if (this.acks === null) return runScript(this.redis, name, this.keyList, args);
    const { reply, acked } = await runScriptAcked(
      this.redis,
      name,
      this.keyList,
      args,
      this.acks.replicas,
      this.acks.timeoutMs,
    );
    if (acked < this.acks.replicas)
      throw new Error(
        `no replica acknowledged the write of ${what} within ${this.acks.timeoutMs} ms: ` +
          "it may be lost in a failover; write it again",
      );
    return reply;
  }
}
