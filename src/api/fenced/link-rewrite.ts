import { Transform, type TransformCallback } from "node:stream";

/**
 * Ironic's links point at itself; a client that follows them must stay behind the fence,
 * so `from` (Ironic's base) becomes `to` (this endpoint's) in the answer as it streams
 * through. A link may straddle two chunks: the last `from.length - 1` bytes of each chunk
 * are held back until the next one shows whether they begin a link. Each chunk is one
 * `indexOf` pass, so a page of 1,000 nodes (half a megabyte) never holds the event loop
 * in one step, and the answer is passed on at the pace the client reads it.
 */
export class LinkRewrite extends Transform {
  private held: Buffer = Buffer.alloc(0);

  constructor(
    private readonly from: Buffer,
    private readonly to: Buffer,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const text = this.held.length === 0 ? chunk : Buffer.concat([this.held, chunk]);
    const { out, rest } = this.rewrite(text, false);
    this.held = rest;
    done(null, out);
  }

  override _flush(done: TransformCallback): void {
    const { out } = this.rewrite(this.held, true);
    this.held = Buffer.alloc(0);
    done(null, out);
  }

  /** `text` rewritten; unless `last`, a tail that may begin a link is kept back as `rest`. */
  private rewrite(text: Buffer, last: boolean): { out: Buffer; rest: Buffer } {
    const { from, to } = this;
    const parts: Buffer[] = [];
    let at = 0;
    for (let found = text.indexOf(from, at); found >= 0; found = text.indexOf(from, at)) {
      parts.push(text.subarray(at, found), to);
      at = found + from.length;
    }
    const keep = last ? 0 : Math.min(text.length - at, from.length - 1);
    parts.push(text.subarray(at, text.length - keep));
    return { out: Buffer.concat(parts), rest: Buffer.from(text.subarray(text.length - keep)) };
  }
}
