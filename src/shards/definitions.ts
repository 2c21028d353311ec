import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";
import { LEASE_TTL_DEFAULT_MS, LeaseTtlMs } from "../domain/lease.js";
import { AgentId, ShardName } from "../domain/names.js";
import { ValidationError, parseOrThrow } from "../domain/validation.js";

/** One file in shards/: `NAME.json`. */
export const ShardDefinition = z.strictObject({
  name: ShardName,
  description: z
    .string({ error: "must be a string" })
    .max(1000, { error: "must be at most 1000 characters" })
    .default(""),
  lease_ttl_ms: LeaseTtlMs.default(LEASE_TTL_DEFAULT_MS),
  /** agents allowed to serve the shard; absent = any agent */
  agents: z.array(AgentId).min(1, { error: "must name at least one agent, or be left out" }).optional(),
});
export type ShardDefinition = z.output<typeof ShardDefinition>;

/** A shard definition file that cannot be used: which file, which fields, why. */
export class ShardDefinitionError extends Error {
  constructor(
    readonly file: string,
    readonly issues: Array<{ field: string; reason: string }>,
  ) {
    super(`${file}: ${issues.map((i) => `${i.field}: ${i.reason}`).join("; ")}`);
    this.name = "ShardDefinitionError";
  }
}

/** The shards an operator defined: per-shard lease TTL and who may serve each. */
export class ShardCatalog {
  private readonly byName: Map<string, ShardDefinition>;

  constructor(definitions: ShardDefinition[] = []) {
    this.byName = new Map(definitions.map((d) => [d.name, d]));
  }

  get definitions(): ShardDefinition[] {
    return [...this.byName.values()];
  }

  get(shard: string): ShardDefinition | undefined {
    return this.byName.get(shard);
  }

  /** A shard nobody defined still works, with the default TTL: shard keys come from Ironic. */
  ttlMsFor(shard: string): number {
    return this.byName.get(shard)?.lease_ttl_ms ?? LEASE_TTL_DEFAULT_MS;
  }

  mayServe(shard: string, agent: string): boolean {
    const allowed = this.byName.get(shard)?.agents;
    return allowed === undefined || allowed.includes(agent);
  }
}

function parseFile(path: string): ShardDefinition {
  const file = basename(path);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ShardDefinitionError(file, [
      { field: "(file)", reason: `not valid JSON: ${(error as Error).message}` },
    ]);
  }
  let definition: ShardDefinition;
  try {
    definition = parseOrThrow(ShardDefinition, raw);
  } catch (error) {
    if (error instanceof ValidationError) throw new ShardDefinitionError(file, error.issues);
    throw error;
  }
  // The file name is the shard name, so `ls shards/` tells an operator what is defined.
  if (`${definition.name}.json` !== file) {
    throw new ShardDefinitionError(file, [
      { field: "name", reason: `must match the file name (${definition.name}.json)` },
    ]);
  }
  return definition;
}

/** Load every `*.json` in `dir` (other files, such as a README, are ignored). */
export function loadShardCatalog(dir: string): ShardCatalog {
  if (!existsSync(dir)) throw new Error(`shard definitions directory not found: ${dir}`);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort();
  return new ShardCatalog(files.map((f) => parseFile(join(dir, f))));
}
