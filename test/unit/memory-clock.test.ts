import { expect } from "chai";
import { MemoryLeases } from "../../src/store/memory/leases.js";

/**
 * The embedded store's clock runs with the process's monotonic clock, which falls behind
 * the wall clock where the host is suspended or its VM paused (issue #45: 6 s in 13
 * minutes). Its leases must keep running on it — a step of the wall clock must move
 * none — but the times it tells (a lease's `since`, an agent's `last_seen`) are the wall
 * clock's, counted back by how long ago each was on its own clock.
 */
describe("Embedded store: times told on the wall clock, leases on its own", () => {
  const S = 1_000_000;
  let own = 1_800_000_000 * S;
  let wall = own + 6 * S; // its own clock 6 s behind
  const store = new MemoryLeases(
    () => own,
    0,
    undefined,
    () => wall,
  );
  const pass = (ownUs: number, wallUs: number) => {
    own += ownUs;
    wall += wallUs;
  };

  it("tells a lease's since and an agent's last_seen by the wall clock, ages and TTLs by its own", async () => {
    const granted = await store.acquire({ shard: "s1", agent: "a", ttlMs: 6000 });
    expect(granted).to.include({ ok: true, atUs: wall, sinceUs: wall });
    const seen = await store.heartbeat("a", ["s1"], "", 60_000);
    expect(seen).to.include({ lastSeenMs: wall / 1000, ageMs: 0 });

    // 1 s by its clock, 1.5 s by the wall's (it falls further behind).
    pass(1 * S, 1.5 * S);
    const read = await store.read("s1");
    expect(read.atUs).to.equal(wall);
    expect(read.current).to.deep.include({ holder: "a", ttlMs: 5000, sinceUs: wall - 1 * S });
    const [agent] = await store.agents();
    expect(agent).to.deep.include({ agent: "a", ageMs: 1000, lastSeenMs: wall / 1000 - 1000 });
    expect(await store.agent("a")).to.deep.equal(agent);
    const renewed = await store.renew({
      shard: "s1",
      agent: "a",
      token: granted.ok ? granted.token : 0,
      ttlMs: 6000,
    });
    expect(renewed).to.include({ ok: true, sinceUs: wall - 1 * S });
  });

  it("a wall clock stepped on an hour moves no lease: the holder's lease stays live", async () => {
    pass(0, 3600 * S);
    const read = await store.read("s1");
    expect(read.current).to.deep.include({ holder: "a", ttlMs: 6000 });
    expect(read.current!.sinceUs).to.equal(wall - 1 * S);
    const other = await store.acquire({ shard: "s1", agent: "b", ttlMs: 6000 });
    expect(other).to.include({ ok: false, reason: "held" });
    // What the answer told did not change the table: read again, the same.
    expect((await store.read("s1")).current).to.deep.equal(read.current);
  });

  it("tells an agent's last_seen alike at its heartbeat and in a listing when the clocks were read a few ms apart", async () => {
    const seen = await store.heartbeat("c", [], "", 60_000);
    if (!("lastSeenMs" in seen)) throw new Error(`heartbeat refused: ${JSON.stringify(seen)}`);
    // 30 ms by its clock, 35 by the wall's: the jitter of reading two clocks, no drift to tell.
    pass(30_000, 35_000);
    const listed = (await store.agents()).find((a) => a.agent === "c")!;
    expect(listed, "compute-c in the listing").to.deep.include({ lastSeenMs: seen.lastSeenMs, ageMs: 30 });
  });
});
