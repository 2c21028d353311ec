import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { z } from "zod";
import { LEASE_TTL_DEFAULT_MS, LeaseTtlMs } from "../domain/lease.js";
import { AgentId, ShardName, noCaseTwins } from "../domain/names.js";
import {
  ValidationError,
  describeIssues,
  parseOrThrow,
  uniqueField,
  type FieldIssue,
} from "../domain/validation.js";

/**
 * The most agents a definition written now may allow (one active, the rest standbys):
 * a longer list is refused in one step, not agent by agent. A file or a stored definition
 * of an older bridge with more is still read — refusing it would open its shard to any
 * agent — so the bound is on what is written (ShardDefinitionBody, a migration's plan).
 */
export const MAX_SHARD_AGENTS = 100;

/** `agents` bounded as a definition written now is (the API's body, a migration's plan). */
export const boundShardAgents = (agents: z.ZodArray<typeof AgentId>) =>
  agents.max(MAX_SHARD_AGENTS, { error: `must name at most ${MAX_SHARD_AGENTS} agents` });

const ShardAgents = z.array(AgentId).min(1, { error: "must name at least one agent, or be left out" });
/** An agent named twice, or two equal but for case (one host to nova), is refused (last: after the list's other checks). */
const uniqueAgents = (payload: z.core.ParsePayload<string[]>): void => {
  uniqueField("agents", null, (agent: string) => agent)(payload);
  noCaseTwins("agents", null, (agent: string) => agent)(payload);
};

/** One file in shards/ (`NAME.json`), or one definition written through the API. */
export const ShardDefinition = z.strictObject({
  name: ShardName,
  description: z
    .string({ error: "must be a string" })
    .max(1000, { error: "must be at most 1000 characters" })
    .default(""),
  lease_ttl_ms: LeaseTtlMs.default(LEASE_TTL_DEFAULT_MS),
  /** agents allowed to serve the shard (one active, the rest its standbys); absent = any agent */
  agents: ShardAgents.check(uniqueAgents).optional(),
  /**
   * The shard is being filled with nodes from nova's ring (`migrate apply` sets it before
   * it writes shard keys and clears it once every node has its key): until then a lease
   * on it, or a heartbeat declaring it, does not take the agent out of the legacy pool,
   * so the agent keeps listing the nodes that have no key yet. See src/ring/membership.ts.
   */
  filling: z.boolean({ error: "must be true or false" }).optional(),
});
export type ShardDefinition = z.output<typeof ShardDefinition>;

/** A definition's body as the API takes it: the shard's name is the path's. */
export const ShardDefinitionBody = ShardDefinition.omit({ name: true }).extend({
  agents: boundShardAgents(ShardAgents).check(uniqueAgents).optional(),
});

/** Where a shard's definition comes from: a file of this bridge, or the store all bridges share. */
export type DefinitionSource = "file" | "store";

/** A shard definition file that cannot be used: which file, which fields, why. */
export class ShardDefinitionError extends Error {
  constructor(
    readonly file: string,
    readonly issues: FieldIssue[],
    unlisted = 0,
  ) {
    super(`${file}: ${describeIssues(issues, unlisted)}`);
    this.name = "ShardDefinitionError";
  }
}

/**
 * The shards an operator defined: per-shard lease TTL and who may serve each. Two
 * sources: files in shards/, read once at start (this bridge's own), and definitions in
 * the store, written through the API and refreshed from it (see StoredDefinitions), so
 * every bridge on one store serves the same ones. A name a file defines is the file's on
 * this bridge; the API refuses to define it in the store (409).
 */
export class ShardCatalog {
  private readonly files: Map<string, ShardDefinition>;
  private stored = new Map<string, ShardDefinition>();

  /**
   * `allowUndefined`: whether an agent may take a lease on a shard that no definition
   * names and no node carries (serve --allow-undefined-shards). Off by default: such a
   * name is a typo far more often than a plan, and every lease leaves the shard listed.
   */
  constructor(
    definitions: ShardDefinition[] = [],
    readonly allowUndefined = false,
  ) {
    this.files = new Map(definitions.map((d) => [d.name, d]));
  }

  /** Every definition: the files', then the store's that no file shadows. */
  get definitions(): ShardDefinition[] {
    return [...this.files.values(), ...[...this.stored.values()].filter((d) => !this.files.has(d.name))];
  }

  get(shard: string): ShardDefinition | undefined {
    return this.files.get(shard) ?? this.stored.get(shard);
  }

  sourceOf(shard: string): DefinitionSource | null {
    return this.files.has(shard) ? "file" : this.stored.has(shard) ? "store" : null;
  }

  /** Replace the store's definitions with those read from it now. */
  useStored(definitions: Iterable<ShardDefinition>): void {
    this.stored = new Map([...definitions].map((d) => [d.name, d]));
  }

  /** Whether `migrate apply` is still filling the shard from nova's ring (see ShardDefinition.filling). */
  isFilling(shard: string): boolean {
    return this.get(shard)?.filling === true;
  }

  /** A shard nobody defined still works, with the default TTL: shard keys come from Ironic. */
  ttlMsFor(shard: string): number {
    return this.get(shard)?.lease_ttl_ms ?? LEASE_TTL_DEFAULT_MS;
  }

  mayServe(shard: string, agent: string): boolean {
    const allowed = this.get(shard)?.agents;
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
    if (error instanceof ValidationError) throw new ShardDefinitionError(file, error.issues, error.unlisted);
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
export function loadShardCatalog(dir: string, allowUndefined = false): ShardCatalog {
  if (!existsSync(dir)) throw new Error(`shard definitions directory not found: ${dir}`);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort();
  return new ShardCatalog(
    files.map((f) => parseFile(join(dir, f))),
    allowUndefined,
  );
}
