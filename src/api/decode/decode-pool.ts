import { Worker } from "node:worker_threads";
import type { TraitRule } from "../../bridge/inspection/trait-rules.js";
import { joinChunks } from "../http/body.js";
import { decodeText, type DecodeJob, type ResultOf } from "./jobs.js";
import type { Decoded } from "./result.js";
import { ownBytes } from "./transfer.js";

/**
 * The worker thread: from dist the compiled worker.js; from source (tsx) worker-dev.mjs,
 * which registers tsx in the thread first (a worker does not inherit `--import tsx`).
 */
function spawnWorker(workerData: unknown): Worker {
  const file = import.meta.url.endsWith(".ts") ? "./worker-dev.mjs" : "./worker.js";
  return new Worker(new URL(file, import.meta.url), { workerData });
}

/** Bodies up to this size decode on the event loop: under a millisecond, less than a trip to the worker. */
const INLINE_MAX_BYTES = 32 * 1024;

interface Pending {
  resolve: (result: Decoded<never>) => void;
  reject: (error: Error) => void;
}

/**
 * Decodes request bodies: small ones here, large ones (a bulk of 20,000 nodes, an
 * inspection result near its megabyte) in one worker thread started on first use. The
 * same pure decoders run either way. A worker that dies fails what it held and is
 * started again on the next large body.
 */
export class DecodePool {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  constructor(private readonly rules: TraitRule[]) {}

  /**
   * Decode `body` (the chunks it was read in, see readRequestChunks) as `job` says. A
   * large body is handed to the worker chunk by chunk, not copied and not joined here
   * (see transfer.ts): the caller must not read `body` afterwards (it may be emptied).
   */
  decode<J extends DecodeJob>(job: J, body: readonly Buffer[]): Promise<Decoded<ResultOf<J>>> {
    const length = body.reduce((sum, chunk) => sum + chunk.length, 0);
    if (length <= INLINE_MAX_BYTES) {
      const text = joinChunks(body).toString("utf8");
      return Promise.resolve(decodeText(job, text, this.rules) as Decoded<ResultOf<J>>);
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const worker = this.start();
      // The worker holds the process open only while it holds a job: an idle pool must
      // not keep a stopped bridge (or a test run) alive.
      if (this.pending.size === 0) worker.ref();
      this.pending.set(id, { resolve, reject });
      const chunks = body.map(ownBytes);
      worker.postMessage({ id, job, chunks }, [...new Set(chunks.map((chunk) => chunk.buffer))]);
    });
  }

  private start(): Worker {
    if (this.worker !== null) return this.worker;
    const worker = spawnWorker({ rules: this.rules });
    worker.on(
      "message",
      ({ id, result, failure }: { id: number; result?: Decoded<never>; failure?: string }) => {
        const waiting = this.pending.get(id);
        this.pending.delete(id);
        if (this.pending.size === 0) worker.unref();
        if (failure !== undefined) waiting?.reject(new Error(`decode worker: ${failure}`));
        else waiting?.resolve(result!);
      },
    );
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = null;
      for (const waiting of this.pending.values()) waiting.reject(error);
      this.pending.clear();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`decode worker exited (${code})`)));
    // Unref after the listeners: adding a "message" listener refs the worker again.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  async close(): Promise<void> {
    await this.worker?.terminate();
    this.worker = null;
  }
}
