import { lstatSync, readdirSync, readFileSync, readlinkSync, statSync, type Stats } from "node:fs";
import { basename, join } from "node:path";
import { ConfigError, withoutBom } from "../../runtime/config.js";
import { ShardDefinitionFile } from "../../contracts/shards.js";
import { LEASE_TTL_DEFAULT_MS } from "../../core/lease/bounds.js";
import { caseTwins, shardKey } from "../../core/names.js";
import { ValidationError, describeIssues, parseOrThrow, type FieldIssue } from "../../core/validation.js";

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
 * this bridge; the API refuses to define it in the store (409). Names are one shard when
 * equal but for case (shardKey): files may not define two such, nor the API a stored one
 * of a name a file or the store defines already.
 */
export class ShardCatalog {
  private readonly files: Map<string, ShardDefinitionFile>;
  private stored = new Map<string, ShardDefinitionFile>();
  /** the names the files and the store define, by shardKey: the files' first */
  private byKey = new Map<string, Array<{ name: string; source: DefinitionSource }>>();

  /**
   * `allowUndefined`: whether an agent may take a lease on a shard that no definition
   * names and no node carries (serve --allow-undefined-shards). Off by default: such a
   * name is a typo far more often than a plan, and every lease leaves the shard listed.
   * Two definitions equal but for case are refused (ShardDefinitionError, the later named).
   */
  constructor(
    definitions: ShardDefinitionFile[] = [],
    readonly allowUndefined = false,
  ) {
    // caseTwins lower-cases as shardKey does.
    const names = definitions.map((d) => d.name);
    for (const { index, twinOf } of caseTwins(names)) {
      const [name, twin] = [names[index]!, names[twinOf]!];
      throw new ShardDefinitionError(`${name}.json`, [
        {
          field: "name",
          reason: `${JSON.stringify(name)} and ${twin}.json's ${JSON.stringify(twin)} are one shard to nova and Ironic's database (they compare shard names without case): define it once`,
        },
      ]);
    }
    this.files = new Map(definitions.map((d) => [d.name, d]));
    this.index();
  }

  /** Every definition: the files', then the store's that no file shadows. */
  get definitions(): ShardDefinitionFile[] {
    return [...this.files.values(), ...this.stored.values()];
  }

  get(shard: string): ShardDefinitionFile | undefined {
    return this.files.get(shard) ?? this.stored.get(shard);
  }

  sourceOf(shard: string): DefinitionSource | null {
    return this.files.has(shard) ? "file" : this.stored.has(shard) ? "store" : null;
  }

  /**
   * A defined shard that is `shard` to nova and Ironic but spelled otherwise (equal but
   * for case), and where it is defined; null when none is.
   */
  twinOf(shard: string): { name: string; source: DefinitionSource } | null {
    return this.byKey.get(shardKey(shard))?.find((d) => d.name !== shard) ?? null;
  }

  /**
   * Replace the store's definitions with those read from it now (every one). One a file
   * shadows (the same name, or one equal but for case: the file's is this bridge's) is
   * left out and answered, so the caller can say so.
   */
  useStored(definitions: ReadonlyMap<string, ShardDefinitionFile>): ShardDefinitionFile[] {
    this.stored = new Map();
    this.index();
    return this.storedChanged(definitions);
  }

  /**
   * Take the store's definitions that changed: each shard's as read now, null for one
   * removed. Answers those a file shadows, left out (see useStored). One step per change,
   * not per definition: a write among thousands stays cheap.
   */
  storedChanged(changes: ReadonlyMap<string, ShardDefinitionFile | null>): ShardDefinitionFile[] {
    const shadowed: ShardDefinitionFile[] = [];
    for (const [name, definition] of changes) {
      if (this.stored.delete(name)) this.unindex(name);
      if (definition === null) continue;
      const file = this.byKey.get(shardKey(name))?.find((d) => d.source === "file");
      if (file !== undefined) {
        if (file.name !== name) shadowed.push(definition);
        continue;
      }
      this.stored.set(name, definition);
      this.indexOne(name, "store");
    }
    return shadowed;
  }

  private index(): void {
    this.byKey = new Map();
    for (const name of this.files.keys()) this.indexOne(name, "file");
    for (const name of this.stored.keys()) this.indexOne(name, "store");
  }

  private indexOne(name: string, source: DefinitionSource): void {
    const key = shardKey(name);
    this.byKey.set(key, [...(this.byKey.get(key) ?? []), { name, source }]);
  }

  private unindex(name: string): void {
    const key = shardKey(name);
    const left = (this.byKey.get(key) ?? []).filter((d) => !(d.name === name && d.source === "store"));
    if (left.length === 0) this.byKey.delete(key);
    else this.byKey.set(key, left);
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

/**
 * Why the entry `path` of shards/ is not a file to read, or null when it is one: a regular
 * file, or a link to one (Kubernetes mounts a ConfigMap's files as links). Told from its
 * type alone, without opening it: a FIFO opened for reading would wait for a writer, and
 * the bridge would hang at start saying nothing.
 */
function notARegularFile(path: string): string | null {
  let stats: Stats;
  try {
    stats = statSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" && lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink())
      return `a symbolic link to ${readlinkSync(path)}, which does not exist`;
    return `cannot be read: ${(error as Error).message}`;
  }
  if (stats.isFile()) return null;
  const kind = stats.isDirectory()
    ? "a directory"
    : stats.isFIFO()
      ? "a FIFO (named pipe)"
      : stats.isSocket()
        ? "a socket"
        : "a device";
  return `${kind}, not a regular file: shards/ holds one regular file NAME.json per shard, or a link to one`;
}

function parseFile(path: string): ShardDefinitionFile {
  const file = basename(path);
  const unfit = notARegularFile(path);
  if (unfit !== null) throw new ShardDefinitionError(file, [{ field: "(file)", reason: unfit }]);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ShardDefinitionError(file, [
      { field: "(file)", reason: `cannot be read: ${(error as Error).message}` },
    ]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(withoutBom(text));
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

/**
 * Load every `*.json` in `dir` (other names, such as a README, are ignored). Any of them
 * that is not a regular file (a directory, a FIFO, a link to nothing) stops the start
 * like a file that does not parse: skipped, it would drop the definition an operator meant,
 * and with it the shard's list of agents allowed to serve it.
 */
export function loadShardCatalog(dir: string, allowUndefined = false): ShardCatalog {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT" ? "not found" : code === "ENOTDIR" ? "not a directory" : (error as Error).message;
    throw new ConfigError(`shard definitions directory ${dir}: ${why}`);
  }
  const files = names.filter((f) => f.endsWith(".json")).sort();
  return new ShardCatalog(
    files.map((f) => parseFile(join(dir, f))),
    allowUndefined,
  );
}
