/**
 * The decode worker: a thread that turns large request bodies into small results (see
 * pool.ts), so the event loop every renew waits on never parses a megabyte itself.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { TraitRule } from "../../bridge/inspection/trait-rules.js";
import { decodeBulk } from "./bulk.js";
import { decodeText, type DecodeJob } from "./jobs.js";
import { ownBytes } from "./transfer.js";

const { rules } = workerData as { rules: TraitRule[] };

parentPort!.on("message", ({ id, job, chunks }: { id: number; job: DecodeJob; chunks: Uint8Array[] }) => {
  // Joined here, off the event loop (see readRequestChunks).
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    if (job.kind === "bulk") {
      // The packed nodes go back transferred (see transfer.ts): the event loop never copies them whole.
      const result = decodeBulk(text);
      if (!result.ok) return parentPort!.postMessage({ id, result });
      const packed = ownBytes(result.value.packed);
      const value = { packed, count: result.value.count };
      parentPort!.postMessage({ id, result: { ok: true, value } }, [packed.buffer]);
    } else {
      parentPort!.postMessage({ id, result: decodeText(job, text, rules) });
    }
  } catch (error) {
    parentPort!.postMessage({ id, failure: String(error) });
  }
});
