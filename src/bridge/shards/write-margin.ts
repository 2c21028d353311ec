import { fenceMarginMs, type FenceRequest } from "../../core/lease/bounds.js";
import type { LeaseView } from "../../core/lease/machine.js";
import { realClock, type Clock } from "../../runtime/clock.js";
import type { Store } from "../../store/store.js";
import type { ShardCatalog } from "./catalog.js";
import { fenceServing } from "./revocation.js";

/** A look at the writer's lease, and when (on the judge's clock) it was taken. */
export interface LeaseSeen {
  current: LeaseView;
  seenAtMs: number;
}

/** How the judgement of a write's lease ended. */
export type WriteMargin =
  /** the lease is the writer's with at least the margin left, as `seen` */
  | { kind: "clear"; seen: LeaseSeen; waitedMs: number }
  /** it had less than `marginMs` left (`leftMs` at the first look) and ended unrenewed */
  | { kind: "late"; leftMs: number; marginMs: number; waitedMs: number }
  /** it was released, or is another's now */
  | { kind: "gone"; waitedMs: number };

/**
 * Judge a write through the fenced endpoint by the lease its writer showed (`first`, found
 * live by fenceServing): clear once the lease has at least the margin left (fenceMarginMs).
 *
 * A lease under the margin is not refused at once. A holder whose renew is merely late —
 * its process or this bridge busy, as right after a failover when a new nova-compute starts
 * on the same cores — dips under the margin until its renew lands, and nova does not retry
 * a refused write unless `[ironic] status_code_retries` is set: its clean-up of a deleted
 * server's node is then lost. So the write waits, at most until the lease would end, for
 * the next renew or release of the shard through this bridge, and is judged again; at the
 * lease's end one more look at the store finds a renew sent through another bridge. A
 * writer past its own deadline (frozen, then resumed) has nobody renewing for it: its
 * write waits out the lease and is refused, as before, and never reaches Ironic with less
 * than the margin left. `signal` ends the wait with its reason (the write's deadline, the
 * caller gone). The wait holds one timer and two listeners, not the event loop.
 */
export async function judgeWriteMargin(
  store: Store,
  catalog: ShardCatalog,
  request: FenceRequest,
  first: LeaseSeen,
  signal: AbortSignal,
  clock: Clock = realClock,
): Promise<WriteMargin> {
  const marginMs = fenceMarginMs(catalog.ttlMsFor(request.shard));
  const began = clock.now();
  let seen = first;
  let waitedMs = 0; // none unless the lease was found under the margin
  for (;;) {
    if (seen.current.ttlMs >= marginMs) return { kind: "clear", seen, waitedMs };
    const leftMs = seen.current.ttlMs - (clock.now() - seen.seenAtMs);
    const woke = await nextChange(store, request.shard, leftMs, signal, clock);
    const seenAtMs = clock.now();
    const outcome = await fenceServing(store, catalog, request);
    signal.throwIfAborted();
    waitedMs = clock.now() - began;
    const unrenewed = outcome.current === null || outcome.current.ttlMs < marginMs;
    if (woke === "ended" && unrenewed)
      return { kind: "late", leftMs: first.current.ttlMs, marginMs, waitedMs };
    if (!outcome.allowed || outcome.current === null) return { kind: "gone", waitedMs };
    seen = { current: outcome.current, seenAtMs };
  }
}

/**
 * The next renew or release of `shard` through this bridge ("changed"), or the lease's
 * end `leftMs` from now ("ended"), whichever comes first; rejects with `signal`'s reason.
 */
function nextChange(
  store: Store,
  shard: string,
  leftMs: number,
  signal: AbortSignal,
  clock: Clock,
): Promise<"changed" | "ended"> {
  return new Promise((resolve, reject) => {
    const stops: Array<() => void> = [];
    const end = (then: () => void) => {
      for (const stop of stops) stop();
      then();
    };
    const timer = clock.set(() => end(() => resolve("ended")), Math.max(0, leftMs));
    const aborted = () => end(() => reject(signal.reason));
    stops.push(
      () => clock.clear(timer),
      store.leaseChanges.onRenew((renewed) => {
        if (renewed === shard) end(() => resolve("changed"));
      }),
      store.leaseChanges.onRelease((released) => {
        if (released === shard) end(() => resolve("changed"));
      }),
      () => signal.removeEventListener("abort", aborted),
    );
    if (signal.aborted) aborted();
    else signal.addEventListener("abort", aborted, { once: true });
  });
}
