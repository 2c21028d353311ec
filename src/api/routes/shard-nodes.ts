import type { NodeRegistry } from "../../nodes/registry.js";
import { openNodeJson } from "./views.js";

/** Shards larger than this are streamed page by page, never held whole. */
const MAX_CACHED_NODES = 5000;
/** All cached shards together, in characters (about twice as many bytes). */
const MAX_CACHED_CHARS = 32 * 1024 * 1024;

interface Entry {
  version: number;
  /** each node's JSON without its closing brace */
  open: string[];
  chars: number;
  /** the last list asked for: the nodes with one set of extra fields, comma-joined, encoded */
  joined: { extra: string; bytes: Buffer } | null;
}

/**
 * The JSON of each shard's nodes, kept while the shard's version (see placeVersions)
 * stays: an active agent re-reads its shard's nodes far more often than they change, so
 * an unchanged shard is answered from one version read and no per-node work. Every
 * bridge keeps its own; the version, kept in the store, tells each when to read again.
 */
export class ShardNodesCache {
  private readonly entries = new Map<string, Entry>();
  private readonly building = new Map<string, Promise<Entry | null>>();
  /** shards found too large to keep, at the version they were found so: not read again until it moves */
  private readonly tooLarge = new Map<string, number>();
  private chars = 0;

  constructor(private readonly nodes: NodeRegistry) {}

  /**
   * The shard's nodes as comma-joined JSON objects, each ending with `extra` (fields as
   * JSON text, e.g. `,"token":7`); null for a shard too large to keep (stream it instead).
   * `version`: the shard's version when the caller read it already (placeVersions).
   */
  async joined(shard: string, extra: string, version?: number): Promise<Buffer | null> {
    version ??= (await this.nodes.placeVersions([shard]))[0]!;
    if (this.tooLarge.get(shard) === version) return null;
    let entry = this.entries.get(shard);
    if (entry !== undefined && entry.version === version) {
      // Most recently used last: eviction takes from the front.
      this.entries.delete(shard);
      this.entries.set(shard, entry);
    } else {
      let build = this.building.get(shard);
      if (build === undefined) {
        build = this.build(shard, version).finally(() => this.building.delete(shard));
        this.building.set(shard, build);
      }
      const built = await build;
      if (built === null) return null;
      entry = built;
    }
    if (entry.joined?.extra !== extra) {
      const bytes = Buffer.from(entry.open.map((open) => `${open}${extra}}`).join(","));
      this.chars += bytes.length - (entry.joined?.bytes.length ?? 0);
      entry.joined = { extra, bytes };
      this.evict();
    }
    return entry.joined.bytes;
  }

  private async build(shard: string, version: number): Promise<Entry | null> {
    const open: string[] = [];
    for await (const page of this.nodes.pages({ kind: "places", places: [shard] })) {
      if (open.length + page.length > MAX_CACHED_NODES) {
        this.tooLarge.set(shard, version);
        return null;
      }
      for (const node of page) open.push(openNodeJson(node));
    }
    this.tooLarge.delete(shard);
    const entry: Entry = { version, open, chars: open.reduce((n, s) => n + s.length, 0), joined: null };
    this.forget(shard);
    this.entries.set(shard, entry);
    this.chars += entry.chars;
    this.evict();
    return entry;
  }

  private forget(shard: string): void {
    const old = this.entries.get(shard);
    if (old === undefined) return;
    this.chars -= old.chars + (old.joined?.bytes.length ?? 0);
    this.entries.delete(shard);
  }

  private evict(): void {
    while (this.chars > MAX_CACHED_CHARS && this.entries.size > 1)
      this.forget(this.entries.keys().next().value!);
  }
}
