/**
 * Where shard definitions live when they are written through the API rather than files:
 * in the store, so every bridge on one store serves the same ones. The store keeps each
 * as an opaque record (JSON text, parsed in src/shards/) under its shard name, and a
 * version that changes with every write, so a bridge re-reads them only when they changed.
 */
export interface DefinitionBackend {
  /** changes (increases) with every write; 0 before the first */
  version(): Promise<number>;
  /** every record by shard name, and the version they are at */
  list(): Promise<{ version: number; records: Map<string, string> }>;
  /**
   * Store one shard's record (created or replaced); answers whether it was there before.
   * A record whose name equals another record's but for case (`key`: the name's shardKey)
   * is refused in the same step, nothing written: answered with that other name.
   */
  write(name: string, key: string, record: string): Promise<DefinitionWrite>;
  /** Remove one shard's record; answers whether it was there. */
  remove(name: string, key: string): Promise<DefinitionWritten>;
}

/** A write or removal done: whether the record was there before, and the version it made. */
export interface DefinitionWritten {
  existed: boolean;
  version: number;
}

/** What a definition write did: written, or refused for a stored name equal to it but for case. */
export type DefinitionWrite = DefinitionWritten | { caseTwin: string };
