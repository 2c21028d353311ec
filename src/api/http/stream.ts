import { once } from "node:events";
import type { Response } from "express";
import { LoopSlicer } from "../../runtime/loop.js";
import type { ListPage } from "../../runtime/text/json-list.js";

/** An answer up to this size is sent whole, with its length; a longer one is streamed. */
const WHOLE_MAX_BYTES = 256 * 1024;

/**
 * Answer 200 with `head` as a JSON object followed by `field`, a list written page by
 * page as `pages` yields them, then the fields of `tail()`: an answer of 50,000 nodes never sits whole in
 * memory nor holds the event loop while it is serialised, and a slow reader holds back
 * the pages (backpressure), not the bridge. An answer up to WHOLE_MAX_BYTES goes out
 * whole, with its length, in one write.
 */
export async function streamJsonList(
  res: Response,
  head: Record<string, unknown>,
  field: string,
  pages: AsyncIterable<ListPage>,
  tail?: () => Record<string, unknown>,
): Promise<void> {
  const opening = JSON.stringify(head);
  res.status(200).type("application/json");
  const chunks: Array<string | Buffer> = [
    `${opening.slice(0, -1)}${opening === "{}" ? "" : ","}${JSON.stringify(field)}:[`,
  ];
  let bytes = Buffer.byteLength(chunks[0] as string);
  let streaming = false;
  let first = true;
  const slicer = new LoopSlicer();
  const flush = async () => {
    res.cork();
    let written = true;
    for (const chunk of chunks.splice(0)) written = res.write(chunk);
    res.uncork();
    bytes = 0;
    if (!written) await once(res, "drain");
  };
  for await (const page of pages) {
    // Between pages, whatever their size (the store's answers may come as microtasks).
    await slicer.pause();
    if (page.length === 0) continue;
    if (!first) {
      chunks.push(",");
      bytes += 1;
    }
    first = false;
    const chunk = Buffer.isBuffer(page) ? page : page.join(",");
    chunks.push(chunk);
    bytes += Buffer.isBuffer(chunk) ? chunk.length : Buffer.byteLength(chunk);
    if (bytes < WHOLE_MAX_BYTES) continue;
    streaming = true;
    await flush();
  }
  // Fields known only once the list is out (the marker of the page after), after it.
  const after = tail === undefined ? "{}" : JSON.stringify(tail());
  const closing = after === "{}" ? "]}" : `],${after.slice(1)}`;
  chunks.push(closing);
  if (!streaming) res.set("content-length", String(bytes + Buffer.byteLength(closing)));
  res.cork();
  for (const chunk of chunks.splice(0, chunks.length - 1)) res.write(chunk);
  res.end(chunks[0]);
  res.uncork();
}
