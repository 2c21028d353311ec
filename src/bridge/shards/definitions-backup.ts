import { existsSync } from "node:fs";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { ConfigError, readJsonConfig } from "../../runtime/config.js";
import { DefinitionsBackupFile } from "../../contracts/shards.js";
import type { DefinitionEntry, DefinitionsSeen } from "../../store/ports/definitions.js";
import { logger } from "../../runtime/log.js";

/** What a bridge knows of the store's definitions: where it read them, and every entry. */
export interface DefinitionsCopy {
  seen: DefinitionsSeen;
  entries: Iterable<[string, DefinitionEntry]>;
}

/**
 * The store's shard definitions as this bridge last read them, kept in a file of its own
 * (serve --definitions-backup), where a store that loses its data cannot take them: a
 * bridge started again after the store came back empty (the embedded store: after every
 * restart) gives them back to it (StoredDefinitions). Written whole after every change it
 * reads: to a file beside it, flushed to disk, then renamed over it, so a crash or a full
 * disk leaves the last good copy, never half of one.
 */
export class DefinitionsBackup {
  /** what to write next, read when its turn comes (a burst of changes makes one write) */
  private pending: (() => DefinitionsCopy) | null = null;
  private writing: Promise<void> | null = null;
  private failing = false;

  constructor(
    readonly path: string,
    /** the store it is read from, as logs name it (no password): kept in the file for the operator */
    private readonly store: string,
  ) {}

  /**
   * The copy the file holds, or null when there is none yet. A file that does not parse
   * stops the start (ConfigError, naming the file and the field): a backup is never
   * replaced by what an empty store says without the operator looking.
   */
  load(): (DefinitionsCopy & { entries: Map<string, DefinitionEntry> }) | null {
    if (!existsSync(this.path)) return null;
    const file = readJsonConfig(this.path, DefinitionsBackupFile, `--definitions-backup ${this.path}`);
    const entries = new Map<string, DefinitionEntry>();
    for (const [name, { version, record }] of Object.entries(file.definitions))
      entries.set(name, { version, record: record === null ? null : JSON.stringify(record) });
    logger.info("shard definitions backup read", {
      file: this.path,
      saved_at: file.saved_at,
      from_store: file.store,
      definitions: [...entries.values()].filter((e) => e.record !== null).length,
    });
    return { seen: { mark: file.mark, version: file.version }, entries };
  }

  /**
   * Write the copy `copy` answers, asked for when the write starts. Writes follow each
   * other, the last one asked for winning; a failure is logged once until a write succeeds
   * again, and answered to the caller.
   */
  save(copy: () => DefinitionsCopy): Promise<void> {
    this.pending = copy;
    this.writing ??= this.drain();
    return this.writing;
  }

  /**
   * The file's text: each stored record (the JSON text of an object: the caller leaves out
   * any other) goes in as it is, not parsed again.
   */
  private text({ seen, entries }: DefinitionsCopy): string {
    const parts: string[] = [];
    for (const [name, { version, record }] of entries)
      parts.push(`${JSON.stringify(name)}:{"version":${version},"record":${record ?? "null"}}`);
    const head = {
      format: "shardbridge.definitions-backup.v1",
      store: this.store,
      saved_at: new Date().toISOString(),
      mark: seen.mark,
      version: seen.version,
    } satisfies Omit<DefinitionsBackupFile, "definitions">;
    return `${JSON.stringify(head).slice(0, -1)},"definitions":{${parts.join(",")}}}\n`;
  }

  /**
   * Write what is pending until nothing is. Done is said (`writing` cleared) in the same
   * step that finds nothing pending: a save() a moment later starts a new drain, where
   * clearing it afterwards (a `finally`) would leave that save's copy unwritten.
   */
  private async drain(): Promise<void> {
    for (;;) {
      const pending = this.pending;
      if (pending === null) {
        this.writing = null;
        return;
      }
      const text = this.text(pending());
      this.pending = null;
      try {
        await mkdir(dirname(this.path), { recursive: true });
        await writeAtomically(this.path, text);
        if (this.failing) logger.info("shard definitions backup written again", { file: this.path });
        this.failing = false;
      } catch (error) {
        this.writing = null;
        if (!this.failing)
          logger.warn("shard definitions backup not written", { file: this.path, error: String(error) });
        this.failing = true;
        throw error;
      }
    }
  }

  /** Write the first copy now: a path the bridge cannot write stops the start (ConfigError). */
  async saveAtStart(copy: () => DefinitionsCopy): Promise<void> {
    try {
      await this.save(copy);
    } catch (error) {
      throw new ConfigError(`--definitions-backup ${this.path}: cannot write: ${(error as Error).message}`);
    }
  }
}

/** `text` to a file beside `path`, flushed, renamed over `path`, the folder flushed: all or nothing. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const partial = `${path}.partial`;
  try {
    const file = await open(partial, "w", 0o600);
    try {
      await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(partial, path);
  } catch (error) {
    await rm(partial, { force: true }).catch(() => undefined);
    throw error;
  }
  // The rename is durable once the folder's entry is on disk.
  const folder = await open(dirname(path), "r");
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}
