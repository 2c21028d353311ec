import { logger } from "../log.js";
import { ShardTwinError, shardKey } from "../domain/names.js";
import { fromStore } from "../domain/store-errors.js";
import { ValidationError, parseOrThrow } from "../domain/validation.js";
import type { Store } from "../store/store.js";
import { ShardDefinitionBody, ShardDefinitionFile } from "../contracts/shards.js";
import type { ShardCatalog } from "./definitions.js";

/**
 * How often a bridge looks at the store's definitions version (one small read; the
 * definitions themselves only when it changed). A definition written through one bridge
 * is in force on that bridge when the write is answered, and on every other bridge on the
 * same store within this time: what `migrate apply` waits before it relies on one.
 */
export const DEFINITIONS_REFRESH_MS = 1000;

/** A write refused because a file of this bridge defines the shard: the file wins here. */
export class DefinedByFileError extends Error {
  constructor(readonly shard: string) {
    super(`shard ${shard} is defined by shards/${shard}.json on this bridge: change the file instead`);
    this.name = "DefinedByFileError";
  }
}

/**
 * The store's shard definitions, kept in a catalog: read again whenever the store's
 * version moved (on a timer, and at once after a write through this bridge). The lease
 * routes read the catalog synchronously, so a renew never waits for the store here.
 */
export class StoredDefinitions {
  private version = -1;
  private failing = false;
  private refreshing: Promise<void> | null = null;

  constructor(
    private readonly store: Store,
    private readonly catalog: ShardCatalog,
  ) {}

  /** Read the definitions again if the store's version moved; concurrent calls share one read. */
  refresh(): Promise<void> {
    this.refreshing ??= this.read().finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  private async read(): Promise<void> {
    const version = await fromStore(() => this.store.definitions.version());
    if (version === this.version) return;
    const listed = await fromStore(() => this.store.definitions.list());
    const definitions: ShardDefinitionFile[] = [];
    for (const [name, record] of listed.records) {
      try {
        definitions.push(parseOrThrow(ShardDefinitionFile, { ...JSON.parse(record), name }));
      } catch (error) {
        // Written by a bridge of another version, or by hand: skip it, say so, serve the rest.
        logger.warn("shard definition unreadable", { shard: name, error: String(error) });
      }
    }
    for (const shadowed of this.catalog.useStored(definitions))
      // Written by a bridge whose files differ from this one's: the file's spelling serves here.
      logger.warn("shard definition shadowed by a file's of another case", {
        shard: shadowed.name,
        file_shard: this.catalog.twinOf(shadowed.name)?.name,
      });
    this.version = listed.version;
  }

  /** Refresh every `periodMs` until the store is closed; a failure is logged once per outage. */
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
    this.store.onClose(() => clearInterval(timer));
    return this;
  }

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
    const written = await fromStore(() => this.store.definitions.remove(shard, shardKey(shard)));
    await this.readAtLeast(written.version);
    return written.existed;
  }

  /**
   * Read until the catalog holds `version` or a later one: a read that was under way when
   * a write was made may have seen the store before it.
   */
  private async readAtLeast(version: number): Promise<void> {
    while (this.version < version) await this.refresh();
  }

  /** The version of the store's definitions this bridge last read (-1: none yet). */
  get readVersion(): number {
    return this.version;
  }
}
