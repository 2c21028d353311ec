import { once } from "node:events";
import type { Response } from "express";
import { yieldToLoop } from "../loop.js";

/**
 * Answer 200 with `head` as a JSON object whose last field, `field`, is a list written
 * page by page as `pages` yields them: an answer of 50,000 nodes never sits whole in
 * memory nor holds the event loop while it is serialised, and a slow reader holds back
 * the pages (backpressure), not the bridge.
 */
export async function streamJsonList(
  res: Response,
  head: Record<string, unknown>,
  field: string,
  pages: AsyncIterable<readonly unknown[]>,
): Promise<void> {
  const opening = JSON.stringify(head);
  res.status(200).type("application/json");
  res.write(`${opening.slice(0, -1)}${opening === "{}" ? "" : ","}${JSON.stringify(field)}:[`);
  let first = true;
  for await (const page of pages) {
    if (page.length === 0) continue;
    const items = JSON.stringify(page).slice(1, -1);
    const written = res.write(first ? items : `,${items}`);
    first = false;
    if (!written) await once(res, "drain");
    else await yieldToLoop();
  }
  res.end("]}");
}
