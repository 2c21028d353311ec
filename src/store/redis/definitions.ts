import { randomUUID } from "node:crypto";
import type { RedisClient } from "./connect.js";
import type { KeyLayout } from "./keys.js";
import { volatilityOf } from "./persistence.js";
import { runScript, runScriptAcked, type ScriptName } from "./scripts.js";
import type {
  DefinitionBackend,
  DefinitionEntry,
  DefinitionWrite,
  DefinitionsRead,
  DefinitionsSeen,
} from "../ports/definitions.js";

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
  /** what definitions-read takes */
  private readonly readKeys: string[];
  /** what the writes take: the read's, and each live name by its key */
  private readonly writeKeys: string[];

  constructor(
    private readonly redis: RedisClient,
    keys: KeyLayout["definitions"],
    private readonly acks: { replicas: number; timeoutMs: number } | null,
  ) {
    this.readKeys = [keys.records, keys.version, keys.changes, keys.mark];
    this.writeKeys = [...this.readKeys, keys.names];
  }

  async read(seen: DefinitionsSeen): Promise<DefinitionsRead> {
    const reply = (await runScript(this.redis, "definitions-read", this.readKeys, [
      seen.mark ?? "",
      String(seen.version),
    ])) as string[];
    const entries = new Map<string, DefinitionEntry>();
    for (let i = 3; i < reply.length; i += 3)
      entries.set(reply[i]!, { version: Number(reply[i + 1]), record: reply[i + 2] || null });
    return { version: Number(reply[0]), mark: reply[1] || null, whole: Number(reply[2]) === 1, entries };
  }

  async write(name: string, key: string, record: string | null): Promise<DefinitionWrite> {
    // A refusal writes nothing: no replica needs to have it (refused before the WAIT counts).
    const [existed, version] = (await this.run(
      "definitions-write",
      [name, record ?? "", freshMark(), key],
      name,
      (reply) => (reply as [number, unknown])[0] === -1,
    )) as [number, number | string];
    if (existed === -1) return { caseTwin: String(version) };
    return { existed: existed === 1, version: Number(version) };
  }

  async restore(copy: ReadonlyMap<string, DefinitionEntry>): Promise<{ restored: number }> {
    const args: string[] = [freshMark()];
    for (const [name, { version, record }] of copy) args.push(name, String(version), record ?? "");
    return { restored: Number(await this.run("definitions-restore", args, `${copy.size} definitions`)) };
  }

  volatility(): Promise<string | null> {
    return volatilityOf(this.redis);
  }

  /**
   * A write script, acknowledged by a replica on a replicated store (but for a reply
   * `wroteNothing` says is a refusal); `what` names it in the error.
   */
  private async run(
    name: ScriptName,
    args: string[],
    what: string,
    wroteNothing: (reply: unknown) => boolean = () => false,
  ): Promise<unknown> {
    if (this.acks === null) return runScript(this.redis, name, this.writeKeys, args);
    const { reply, acked } = await runScriptAcked(
      this.redis,
      name,
      this.writeKeys,
      args,
      this.acks.replicas,
      this.acks.timeoutMs,
    );
    if (acked < this.acks.replicas && !wroteNothing(reply))
      throw new Error(
        `no replica acknowledged the write of ${what} within ${this.acks.timeoutMs} ms: ` +
          "it may be lost in a failover; write it again",
      );
    return reply;
  }
}
