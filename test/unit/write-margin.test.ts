import { expect } from "chai";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { judgeWriteMargin, type WriteMargin } from "../../src/bridge/shards/write-margin.js";
import { fenceMarginMs } from "../../src/core/lease/bounds.js";
import type { Store } from "../../src/store/store.js";
import { memoryOnClock } from "../helpers/backends.js";
import { VirtualClock } from "../helpers/virtual-clock.js";

/*
 * A write through the fenced endpoint under a lease with less than TTL/3 left
 * (src/bridge/shards/write-margin.ts), on the embedded store and a virtual clock: the store
 * counts its leases on the same clock as the wait, so each window is exact to the
 * millisecond, however busy the machine.
 */
const TTL_MS = 3000;
const MARGIN_MS = fenceMarginMs(TTL_MS);
const SHARD = "rack-m";

describe("A write under a lease with less than TTL/3 left waits for its holder's renew", () => {
  let clock: VirtualClock;
  let store: Store;
  const catalog = new ShardCatalog([{ name: SHARD, description: "", lease_ttl_ms: TTL_MS }]);

  beforeEach(() => {
    clock = new VirtualClock();
    store = memoryOnClock(clock);
  });
  afterEach(() => store.close());

  /** A lease of host-a, and a write under it started `afterMs` later: how it was judged, and when. */
  const writeAfter = async (afterMs: number, signal = new AbortController().signal) => {
    const grant = await store.acquire({ shard: SHARD, agent: "host-a", ttlMs: TTL_MS });
    if (!grant.ok) throw new Error("not granted");
    await clock.advance(afterMs);
    const request = { shard: SHARD, token: grant.token, fenceKey: grant.fenceKey! };
    const fenced = await store.fence(request);
    expect(fenced.allowed, "the write's lease, live when it arrives").to.equal(true);
    let judged: WriteMargin | Error | null = null;
    void judgeWriteMargin(
      store,
      catalog,
      request,
      { current: fenced.current!, seenAtMs: clock.now() },
      signal,
      clock,
    )
      .then((verdict) => (judged = verdict))
      .catch((error: Error) => (judged = error));
    return { grant, judged: () => judged };
  };

  it("is judged at once when the lease has the margin left", async () => {
    const { judged } = await writeAfter(TTL_MS - MARGIN_MS);
    await clock.advance(0);
    expect(judged()).to.deep.include({ kind: "clear", waitedMs: 0 });
  });

  it("passes once a late renew lands, with the renewed lease's time to write in", async () => {
    const { grant, judged } = await writeAfter(TTL_MS - MARGIN_MS + 100);
    await clock.advance(300);
    expect(judged(), "still waiting: the lease has 600 ms left and nobody renewed").to.equal(null);
    const renewed = await store.renew({ shard: SHARD, agent: "host-a", token: grant.token, ttlMs: TTL_MS });
    expect(renewed.ok).to.equal(true);
    await clock.advance(0);
    const verdict = judged() as WriteMargin;
    expect(verdict).to.deep.include({ kind: "clear", waitedMs: 300 });
    expect(verdict.kind === "clear" && verdict.seen.current.ttlMs).to.equal(TTL_MS);
  });

  it("is refused at the lease's end when nobody renews it (a writer past its deadline)", async () => {
    const { judged } = await writeAfter(TTL_MS - MARGIN_MS + 100);
    await clock.advance(MARGIN_MS - 101);
    expect(judged(), "1 ms before the lease's end").to.equal(null);
    await clock.advance(1);
    expect(judged()).to.deep.equal({
      kind: "late",
      leftMs: MARGIN_MS - 100,
      marginMs: MARGIN_MS,
      waitedMs: MARGIN_MS - 100,
    });
  });

  it("passes at the lease's end when the holder renewed through another bridge (not heard here)", async () => {
    const { grant, judged } = await writeAfter(TTL_MS - MARGIN_MS + 100);
    await clock.advance(200);
    // The backend directly: what a renew through another bridge on the same store does.
    const renewed = await store.backend.renew({
      shard: SHARD,
      agent: "host-a",
      token: grant.token,
      ttlMs: TTL_MS,
    });
    expect(renewed.ok).to.equal(true);
    await clock.advance(MARGIN_MS - 100 - 200 - 1);
    expect(judged(), "unheard until the old lease's end").to.equal(null);
    await clock.advance(1);
    expect(judged()).to.deep.include({ kind: "clear", waitedMs: MARGIN_MS - 100 });
  });

  it("is refused as not the lease once the holder hands it back, and another takes it", async () => {
    const { grant, judged } = await writeAfter(TTL_MS - MARGIN_MS + 100);
    await store.release({ shard: SHARD, agent: "host-a", token: grant.token });
    const other = await store.acquire({ shard: SHARD, agent: "host-b", ttlMs: TTL_MS });
    expect(other.ok).to.equal(true);
    await clock.advance(0);
    expect(judged()).to.deep.equal({ kind: "gone", waitedMs: 0 });
  });

  it("ends with the write's own deadline or its caller, with that reason", async () => {
    const ended = new AbortController();
    const { judged } = await writeAfter(TTL_MS - MARGIN_MS + 100, ended.signal);
    await clock.advance(50);
    ended.abort(new Error("the caller left"));
    await clock.advance(0);
    expect((judged() as Error).message).to.equal("the caller left");
  });
});
