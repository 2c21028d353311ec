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
  /** store (record) or remove (null) one shard's record; answers whether it was there before */
  write(name: string, record: string | null): Promise<{ existed: boolean; version: number }>;
}
