import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { ShardDefinitionFile } from "../contracts/shards.js";
import { LEASE_TTL_DEFAULT_MS } from "../domain/lease.js";
import { ValidationError, describeIssues, parseOrThrow, type FieldIssue } from "../domain/validation.js";

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
  private readonly files: Map<string, ShardDefinitionFile>;
  private stored = new Map<string, ShardDefinitionFile>();

  /**
   * `allowUndefined`: whether an agent may take a lease on a shard that no definition
   * names and no node carries (serve --allow-undefined-shards). Off by default: such a
   * name is a typo far more often than a plan, and every lease leaves the shard listed.
   */
  constructor(
    definitions: ShardDefinitionFile[] = [],
    readonly allowUndefined = false,
  ) {
    this.files = new Map(definitions.map((d) => [d.name, d]));
  }

  /** Every definition: the files', then the store's that no file shadows. */
  get definitions(): ShardDefinitionFile[] {
    return [...this.files.values(), ...[...this.stored.values()].filter((d) => !this.files.has(d.name))];
  }

  get(shard: string): ShardDefinitionFile | undefined {
    return this.files.get(shard) ?? this.stored.get(shard);
  }

  sourceOf(shard: string): DefinitionSource | null {
    return this.files.has(shard) ? "file" : this.stored.has(shard) ? "store" : null;
  }

  /** Replace the store's definitions with those read from it now (every one). */
  useStored(definitions: Map<string, ShardDefinitionFile>): void {
    this.stored = definitions;
  }

  /** Take the store's definitions that changed: each shard's as read now, null for one removed. */
  storedChanged(changes: ReadonlyMap<string, ShardDefinitionFile | null>): void {
    for (const [name, definition] of changes)
      if (definition === null) this.stored.delete(name);
      else this.stored.set(name, definition);
  }

  /** Whether `migrate apply` is still filling the shard from nova's ring (see ShardDefinitionFile.filling). */
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

function parseFile(path: string): ShardDefinitionFile {
  const file = basename(path);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ShardDefinitionError(file, [
      { field: "(file)", reason: `not valid JSON: ${(error as Error).message}` },
    ]);
  }
  let definition: ShardDefinitionFile;
  try {
    definition = parseOrThrow(ShardDefinitionFile, raw);
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
