/**
 * The decode worker: a thread that turns large request bodies into small results (see
 * pool.ts), so the event loop every renew waits on never parses a megabyte itself.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { TraitRule } from "../../traits/inspection.js";
import { decodeBulk } from "./bulk.js";
import type { DecodeJob } from "./pool.js";
import { decodeWebhook } from "./webhook.js";

const { rules } = workerData as { rules: TraitRule[] };

parentPort!.on("message", ({ id, job, body }: { id: number; job: DecodeJob; body: Uint8Array }) => {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");
  try {
    const result = job.kind === "bulk" ? decodeBulk(text) : decodeWebhook(text, rules, job.nowS);
    parentPort!.postMessage({ id, result });
  } catch (error) {
    parentPort!.postMessage({ id, failure: String(error) });
  }
});
