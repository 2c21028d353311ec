/**
 * Where shard definitions live when they are written through the API rather than files:
 * in the store, so every bridge on one store serves the same ones. The store keeps each
 * as an opaque record (JSON text, parsed in src/bridge/shards/) under its shard name.
 *
 * Every write stamps its shard's entry with a version (the store's clock in µs, above the
 * last one), and a removal leaves the entry behind without its record (a tombstone): so a
 * bridge reads only what changed since the version it last read, and a copy of the
 * definitions a bridge kept (in memory, in its backup file) can be merged back into a
 * store that lost them, newest version per shard winning, without bringing back one that
 * was removed after the copy was taken.
 *
 * The definitions also carry a mark: a random id the first write to an empty store leaves
 * there. It goes when the store loses its data, and the next write leaves a new one, so a
 * bridge that finds another mark than the one it read before (or none) knows the store
 * came back empty since (src/bridge/shards/stored-definitions.ts).
 */

/** One shard's entry: its last write's version, and its record (null: removed). */
export interface DefinitionEntry {
  version: number;
  record: string | null;
}

/** What a reader last read: the store's mark (null: none) and version then (-1: nothing yet). */
export interface DefinitionsSeen {
  mark: string | null;
  version: number;
}

/** A read of the store's definitions. */
export interface DefinitionsRead {
  /** the version of the last write (0 before the first) */
  version: number;
  /** null: none (nothing written since the store began) */
  mark: string | null;
  /**
   * true: `entries` is every entry the store holds (its mark is not the one the reader
   * saw, its version is below the one the reader saw, or an older bridge wrote without a
   * version per shard); false: only those written since
   */
  whole: boolean;
  entries: Map<string, DefinitionEntry>;
}

export interface DefinitionBackend {
  /**
   * The entries written since `seen` (none when nothing changed: one small read), or
   * every entry when the store is not the one `seen` describes. Writes nothing.
   */
  read(seen: DefinitionsSeen): Promise<DefinitionsRead>;
  /**
   * Store (record) or remove (null) one shard's record, and a mark where there is none;
   * answers whether one was there before. A record whose name equals another live
   * record's but for case (`key`: the name's shardKey) is refused in the same step,
   * nothing written: answered with that other name.
   */
  write(name: string, key: string, record: string | null): Promise<DefinitionWrite>;
  /**
   * Merge `entries` (a copy a bridge kept) into the store in one step: each is taken only
   * where the store has no entry of that shard or an older one, so of several copies the
   * newest wins whatever order they come in. A record whose name equals another live
   * record's but for case is not taken: the store's spelling stays (one shard to nova and
   * Ironic's database). Answers how many were taken.
   */
  restore(entries: ReadonlyMap<string, DefinitionEntry>): Promise<{ restored: number }>;
  /**
   * Why this store's data would not outlive a restart of its server (Redis with neither
   * AOF nor RDB snapshots; the embedded store, which lives in the process), or null.
   */
  volatility(): Promise<string | null>;
}

/** A write or removal done: whether the record was there before, and the version it made. */
export interface DefinitionWritten {
  existed: boolean;
  version: number;
}

/** What a definition write did: written, or refused for a live name equal to it but for case. */
export type DefinitionWrite = DefinitionWritten | { caseTwin: string };
