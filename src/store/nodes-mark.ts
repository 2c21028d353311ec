import { EventEmitter } from "node:events";
import { fromStore } from "../core/store-errors.js";
import { logger } from "../runtime/log.js";
import type { Store } from "./store.js";

/**
 * Notices a node registry that came back empty (a Redis restarted without persistence):
 * its mark (NodeBackend.mark) is not the one this bridge read before, or it has none.
 * Logged as an error once per loss and counted (/metrics); `lost` is emitted then, for whoever can bring the
 * nodes back (serve --ironic reads them from Ironic again). Read once a `periodMs`, one
 * small command.
 */
export class NodesMark extends EventEmitter<{ lost: [] }> {
  private seen: string | null = null;
  /** the check under way: checks follow each other, so an older reading never lands last */
  private checking: Promise<void> = Promise.resolve();
  /** losses noticed (for /metrics) */
  losses = 0;

  constructor(private readonly store: Store) {
    super();
    // A registry's first upsert leaves its mark: read it at once, not up to a period later,
    // so a loss right after is noticed too.
    store.nodes.onUpsert = () => {
      if (this.seen === null) void this.check().catch(() => undefined);
    };
  }

  /** Read the mark, after any read under way; a mark other than the last one read (or none after one) is a loss. */
  check(): Promise<void> {
    this.checking = this.checking.catch(() => undefined).then(() => this.read());
    return this.checking;
  }

  private async read(): Promise<void> {
    const mark = await fromStore(() => this.store.nodes.backend.mark());
    const before = this.seen;
    this.seen = mark;
    if (before === null || before === mark) return;
    this.losses++;
    logger.error("store came back empty: the nodes this bridge read before are gone", {
      then: "their shard keys come back from Ironic with serve --ironic, else by ironic-sync",
    });
    this.emit("lost");
  }

  /** Check every `periodMs` until stopped or the store is closed (a store away: the next check). */
  start(periodMs: number): this {
    void this.check().catch(() => undefined);
    const timer = setInterval(() => void this.check().catch(() => undefined), periodMs);
    timer.unref();
    this.stop = () => clearInterval(timer);
    this.store.onClose(this.stop);
    return this;
  }

  /** Check no more (the bridge's app closed). */
  stop: () => void = () => undefined;
}
