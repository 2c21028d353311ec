import type { NodeRegistry } from "./node-registry.js";
import { nodeJson } from "./node-json.js";

/** Shards larger than this are streamed page by page, never held whole. */
const MAX_CACHED_NODES = 5000;
/**
 * All kept listings together, in bytes: about 170 a node, so a million nodes' listings fit.
 * A listing that cannot stay until its shard is listed again is work spent for nothing, and
 * an agent lists its shard once a minute (nova's resource tracker).
 */
export const MAX_CACHED_BYTES = 192 * 1024 * 1024;

interface Entry {
  version: number;
  /** the fields `bytes` carries after each node's own */
  extra: string;
  /** the nodes' JSON objects, comma-joined, each ending with `extra` and its brace (UTF-8) */
  bytes: Buffer;
  /** where each node's object starts in `bytes` */
  starts: Uint32Array;
}

/**
 * The JSON of each shard's nodes, kept while the shard's version (see placeVersions)
 * stays: an active agent re-reads its shard's nodes far more often than they change, so
 * an unchanged shard is answered from one version read and no per-node work. Every
 * bridge keeps its own; the version, kept in the store, tells each when to read again.
 *
 * A listing is kept as bytes outside V8's heap, never as strings: a kept listing lives
 * past the young generation's collections, and at a million nodes strings kept here were
 * a third of what those collections copied and promoted (docs/PERFORMANCE-LOG.md, 2026-12-04, night).
 */
export class ShardNodesCache {
  private readonly entries = new Map<string, Entry>();
  private readonly building = new Map<string, { version: number; entry: Promise<Entry | null> }>();
  /** shards found too large to keep, at the version they were found so: not read again until it moves */
  private readonly tooLarge = new Map<string, number>();
  private bytes = 0;

  constructor(
    private readonly nodes: NodeRegistry,
    private readonly maxBytes = MAX_CACHED_BYTES,
  ) {}

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
      // A build under way is shared by callers that read the same version only: one that
      // read a later version must not be answered from nodes read before it.
      let build = this.building.get(shard);
      if (build?.version !== version) {
        const started = { version, entry: this.build(shard, version, extra) };
        build = started;
        this.building.set(shard, started);
        const forget = () => {
          if (this.building.get(shard) === started) this.building.delete(shard);
        };
        started.entry.then(forget, forget);
      }
      const built = await build.entry;
      if (built === null) return null;
      entry = built;
    }
    if (entry.extra !== extra) {
      entry = withExtra(entry, extra);
      this.keep(shard, entry);
    }
    return entry.bytes;
  }

  private async build(shard: string, version: number, extra: string): Promise<Entry | null> {
    const objects: string[] = [];
    for await (const page of this.nodes.pages({ kind: "places", places: [shard] })) {
      if (objects.length + page.length > MAX_CACHED_NODES) {
        this.tooLarge.set(shard, version);
        return null;
      }
      for (const node of page) objects.push(nodeJson(node, extra));
    }
    this.tooLarge.delete(shard);
    const starts = new Uint32Array(objects.length);
    let at = 0;
    for (let i = 0; i < objects.length; i++) {
      starts[i] = at;
      at += Buffer.byteLength(objects[i]!) + 1;
    }
    const entry: Entry = { version, extra, bytes: Buffer.from(objects.join(",")), starts };
    this.keep(shard, entry);
    return entry;
  }

  /** `entry` becomes the shard's listing (most recently used), within the budget. */
  private keep(shard: string, entry: Entry): void {
    this.forget(shard);
    this.entries.set(shard, entry);
    this.bytes += sizeOf(entry);
    while (this.bytes > this.maxBytes && this.entries.size > 0)
      this.forget(this.entries.keys().next().value!);
  }

  private forget(shard: string): void {
    const old = this.entries.get(shard);
    if (old === undefined) return;
    this.bytes -= sizeOf(old);
    this.entries.delete(shard);
  }
}

const COMMA = 0x2c;

function sizeOf(entry: Entry): number {
  return entry.bytes.length + entry.starts.byteLength;
}

/**
 * The same listing with `extra` after each node's own fields in place of the entry's (a
 * new holder's token): copied byte range by byte range, no string made per node.
 */
function withExtra(entry: Entry, extra: string): Entry {
  const { bytes, starts } = entry;
  const count = starts.length;
  const oldTail = Buffer.byteLength(entry.extra) + 1; // the extra and the object's brace
  const tail = Buffer.from(`${extra}}`);
  // Only each node's tail changes length; its own fields and the commas stay.
  const out = Buffer.allocUnsafe(bytes.length + count * (tail.length - oldTail));
  const outStarts = new Uint32Array(count);
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (i > 0) out[at++] = COMMA;
    outStarts[i] = at;
    const end = (i + 1 < count ? starts[i + 1]! - 1 : bytes.length) - oldTail;
    at += bytes.copy(out, at, starts[i], end);
    at += tail.copy(out, at);
  }
  return { version: entry.version, extra, bytes: out, starts: outStarts };
}
