import { logger } from "../../runtime/log.js";
import { LoopSlicer } from "../../runtime/loop.js";
import { StoreUnavailableError, fromStore } from "../../core/store-errors.js";
import { ShardTwinError, shardKey } from "../../core/names.js";
import { ValidationError, parseOrThrow } from "../../core/validation.js";
import type { Store } from "../../store/store.js";
import type { DefinitionEntry, DefinitionsRead, DefinitionsSeen } from "../../store/ports/definitions.js";
import { ShardDefinitionBody, ShardDefinitionFile } from "../../contracts/shards.js";
import type { ShardCatalog } from "./catalog.js";
import type { DefinitionsBackup } from "./definitions-backup.js";

/**
 * How often a bridge looks at the store's definitions (one small read; the definitions
 * themselves only those that changed). A definition written through one bridge is in
 * force on that bridge when the write is answered, and on every other bridge on the same
 * store within this time: what `migrate apply` waits before it relies on one.
 */
export const DEFINITIONS_REFRESH_MS = 1000;

/** A write refused because a file of this bridge defines the shard: the file wins here. */
export class DefinedByFileError extends Error {
  constructor(readonly shard: string) {
    super(`shard ${shard} is defined by shards/${shard}.json on this bridge: change the file instead`);
    this.name = "DefinedByFileError";
  }
}

/** How many of a loss's missing shards a log line names. */
const NAMED_IN_LOG = 20;

/**
 * The store's shard definitions, kept in a catalog: what changed read whenever the store's
 * version moved (on a timer, and at once after a write through this bridge). The lease
 * routes read the catalog synchronously, so a renew never waits for the store here.
 *
 * A store that lost its data (a Redis restarted without persistence, a failover to a
 * replica that missed writes, the embedded store of a restarted bridge) is noticed by its
 * definitions' mark or version (src/store/ports/definitions.ts), logged once, counted, and given
 * back what this bridge read before — from memory, or from its backup file when it
 * started since — newest per shard winning (several bridges may each give theirs back).
 */
export class StoredDefinitions {
  private seen: DefinitionsSeen = { mark: null, version: -1 };
  /** every entry this bridge last read, removed shards' too: what a store that lost them gets back */
  private known = new Map<string, DefinitionEntry>();
  /** shards whose record is no JSON object (written by hand): left in the store, out of the backup */
  private readonly unreadable = new Set<string>();
  private failing = false;
  private refreshing: Promise<void> | null = null;
  /** losses this bridge noticed, and entries it gave back (for /metrics) */
  readonly counts = { losses: 0, restored: 0 };

  /** `backup`: the file this bridge keeps them in; what it holds is in force until the store is read. */
  constructor(
    private readonly store: Store,
    private readonly catalog: ShardCatalog,
    private readonly backup?: DefinitionsBackup,
  ) {
    const copy = backup?.load();
    if (copy === null || copy === undefined) return;
    this.seen = copy.seen;
    const definitions = new Map<string, ShardDefinitionFile>();
    for (const [name, entry] of copy.entries) {
      this.known.set(name, entry);
      const definition = this.parse(name, entry.record);
      if (definition !== null) definitions.set(name, definition);
    }
    this.sayShadowed(this.catalog.useStored(definitions));
  }

  /** Read what changed in the store; concurrent calls share one read. */
  refresh(): Promise<void> {
    this.refreshing ??= this.read().finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  private async read(): Promise<void> {
    const before = this.seen;
    const read = await fromStore(() => this.store.definitions.read(before));
    if (!read.whole) {
      this.seen = { mark: read.mark, version: read.version };
      if (read.entries.size > 0) this.takeChanges(read.entries);
      return;
    }
    // Every entry. The store lost data since this bridge last read it when its mark is
    // another (it came back empty) or its version went back (a failover lost writes);
    // otherwise this is a first read, or an older bridge wrote without a version per shard.
    const loss = before.mark !== null && (read.mark !== before.mark || read.version < before.version);
    const lost = loss ? this.newerThanStore(read.entries) : new Map<string, DefinitionEntry>();
    let restored = 0;
    let merged = read;
    if (lost.size > 0) {
      restored = (await fromStore(() => this.store.definitions.restore(lost))).restored;
      // The store holds the merge now, and whatever was written meanwhile: read it all again.
      merged = await fromStore(() => this.store.definitions.read({ mark: null, version: -1 }));
    }
    await this.takeWhole(merged);
    if (loss) this.noteLoss(before, read, lost, restored);
  }

  /** What this bridge knows that the store lacks, or holds older: a copy to merge back. */
  private newerThanStore(held: ReadonlyMap<string, DefinitionEntry>): Map<string, DefinitionEntry> {
    const lost = new Map<string, DefinitionEntry>();
    for (const [name, entry] of this.known)
      if (!this.unreadable.has(name) && (held.get(name)?.version ?? -1) < entry.version)
        lost.set(name, entry);
    return lost;
  }

  /** Once per loss: an error (the embedded store: a warning, it starts empty by design), and the counts. */
  private noteLoss(
    before: DefinitionsSeen,
    read: DefinitionsRead,
    lost: ReadonlyMap<string, DefinitionEntry>,
    restored: number,
  ): void {
    this.counts.losses++;
    this.counts.restored += restored;
    const emptied = read.mark !== before.mark;
    const missing = [...lost.keys()];
    logger.log(
      this.store.kind === "memory" ? "warn" : "error",
      emptied
        ? "store came back empty: its shard definitions are not those this bridge read before"
        : "store lost shard definition writes: its version went back (a failover to a replica that missed them?)",
      {
        store_version: { before: before.version, now: read.version },
        missing_or_older: missing.length,
        restored,
        shards: missing.slice(0, NAMED_IN_LOG),
        ...(missing.length > NAMED_IN_LOG && { shards_not_named: missing.length - NAMED_IN_LOG }),
        // where the copy came from: this bridge's memory, or the file it started with
        ...(this.backup !== undefined && { backup: this.backup.path }),
      },
    );
  }

  /** Entries written since the last read: each into the catalog (O(changes), not O(definitions)). */
  private takeChanges(entries: ReadonlyMap<string, DefinitionEntry>): void {
    const changes = new Map<string, ShardDefinitionFile | null>();
    for (const [name, entry] of entries) {
      this.known.set(name, entry);
      changes.set(name, this.parse(name, entry.record));
    }
    this.sayShadowed(this.catalog.storedChanged(changes));
    this.saveBackup();
  }

  /** Every entry: the catalog's store definitions replaced at once, parsed a slice of the loop at a time. */
  private async takeWhole(read: DefinitionsRead): Promise<void> {
    const slicer = new LoopSlicer();
    const definitions = new Map<string, ShardDefinitionFile>();
    this.unreadable.clear();
    for (const [name, entry] of read.entries) {
      const definition = this.parse(name, entry.record);
      if (definition !== null) definitions.set(name, definition);
      await slicer.pause();
    }
    this.known = new Map(read.entries);
    this.seen = { mark: read.mark, version: read.version };
    this.sayShadowed(this.catalog.useStored(definitions));
    this.saveBackup();
  }

  /** Definitions written by a bridge whose files differ from this one's: the file's spelling serves here. */
  private sayShadowed(shadowed: readonly ShardDefinitionFile[]): void {
    for (const definition of shadowed)
      logger.warn("shard definition shadowed by a file's of another case", {
        shard: definition.name,
        file_shard: this.catalog.twinOf(definition.name)?.name,
      });
  }

  /** A stored record as a definition; null when removed or unreadable (said in the log). */
  private parse(name: string, record: string | null): ShardDefinitionFile | null {
    this.unreadable.delete(name);
    if (record === null) return null;
    const raw = jsonObject(record);
    if (raw === null) {
      this.unreadable.add(name);
      logger.warn("shard definition unreadable", { shard: name, error: "not a JSON object" });
      return null;
    }
    try {
      return parseOrThrow(ShardDefinitionFile, { ...raw, name });
    } catch (error) {
      // Written by a bridge of another version: skip it, say so, serve the rest (and keep it).
      logger.warn("shard definition unreadable", { shard: name, error: String(error) });
      return null;
    }
  }

  /** What the backup file gets: every entry but the unreadable ones. */
  private copy() {
    const { known, unreadable } = this;
    return {
      seen: this.seen,
      entries: (function* () {
        for (const item of known) if (!unreadable.has(item[0])) yield item;
      })(),
    };
  }

  private saveBackup(): void {
    // A failure is logged by the backup itself, once until it writes again.
    this.backup?.save(() => this.copy()).catch(() => undefined);
  }

  /** Write the backup file now, failing (ConfigError) where it cannot be written: for a bridge's start. */
  async saveBackupAtStart(): Promise<void> {
    await this.backup?.saveAtStart(() => this.copy());
  }

  /**
   * Refresh every `periodMs` until stopped (the bridge's app closed) or the store is closed;
   * a failure is logged once per outage.
   */
  start(periodMs = DEFINITIONS_REFRESH_MS): this {
    const timer = setInterval(() => {
      this.refresh().then(
        () => {
          if (this.failing) logger.info("shard definitions read again from the store");
          this.failing = false;
        },
        (error: unknown) => {
          if (!this.failing) logger.warn("shard definitions not refreshed", { error: String(error) });
          this.failing = true;
        },
      );
    }, periodMs);
    timer.unref();
    this.stop = () => clearInterval(timer);
    this.store.onClose(this.stop);
    return this;
  }

  /**
   * Read the store no more. A bridge that closed must not give a store it no longer
   * serves what it read before (a test's next store, on the same Redis).
   */
  stop: () => void = () => undefined;

  /**
   * Define `shard` in the store (created or replaced); `body` is checked first (a
   * ValidationError names each bad field, and nothing is written). Refused, nothing
   * written, when a file of this bridge defines it (DefinedByFileError) or a shard equal
   * to it but for case is defined (ShardTwinError): the store's own check makes two
   * bridges writing such names at once write one. In force on this bridge when this resolves.
   */
  async put(shard: string, body: unknown): Promise<{ definition: ShardDefinitionFile; created: boolean }> {
    if (typeof body === "object" && body !== null && "name" in body)
      throw new ValidationError([{ field: "name", reason: "is the path's: leave it out of the body" }]);
    const record = parseOrThrow(ShardDefinitionBody, body);
    if (this.catalog.sourceOf(shard) === "file") throw new DefinedByFileError(shard);
    const twin = this.catalog.twinOf(shard);
    if (twin !== null) throw new ShardTwinError(shard, twin.name, twin.source);
    const written = await fromStore(() =>
      this.store.definitions.write(shard, shardKey(shard), JSON.stringify(record)),
    );
    if ("caseTwin" in written) {
      // Written through another bridge since this one last read: read it, as the answer says.
      await this.refresh();
      throw new ShardTwinError(shard, written.caseTwin, "store");
    }
    await this.readAtLeast(written.version);
    return { definition: { name: shard, ...record }, created: !written.existed };
  }

  /** Remove `shard`'s stored definition; false when the store had none. */
  async remove(shard: string): Promise<boolean> {
    if (this.catalog.sourceOf(shard) === "file") throw new DefinedByFileError(shard);
    const written = await fromStore(() => this.store.definitions.write(shard, shardKey(shard), null));
    // Never so: only a record's write can meet a name equal but for case.
    if ("caseTwin" in written) throw new ShardTwinError(shard, written.caseTwin, "store");
    await this.readAtLeast(written.version);
    return written.existed;
  }

  /**
   * Read until the catalog holds `version` or a later one: a read that was under way when
   * a write was made may have seen the store before it (a second read then has it). A
   * store that lost its data meanwhile may never show it: the write is then reported as
   * not made, for the caller to make again.
   */
  private async readAtLeast(version: number): Promise<void> {
    for (let reads = 0; this.seen.version < version; reads++) {
      if (reads === 3)
        throw new StoreUnavailableError(
          new Error("the store lost its data while the definition was written"),
        );
      await this.refresh();
    }
  }

  /** The version of the store's definitions this bridge last read (-1: none yet). */
  get readVersion(): number {
    return this.seen.version;
  }
}

/** `text` as the JSON object it holds, or null when it holds none. */
function jsonObject(text: string): object | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}
