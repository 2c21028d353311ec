import { VirtualClock } from "../helpers/virtual-clock.js";
import { expect } from "chai";
import { TokenAuthority } from "../../src/api/http/auth.js";
import type { StatusSnapshot } from "../../src/api/ui/status-view.js";
import { encodePageModel, pageModel } from "../../src/api/ui/model.js";
import { leaseTransitions, type LeaseLook, type SeenLease } from "../../src/api/ui/transitions.js";
import { StatusWatcher, type Viewer } from "../../src/api/ui/status-watcher.js";

const T0 = Date.parse("2026-12-01T03:00:00.000Z");
const lease = (holder: string, token: number, sinceMs: number, deadlineMs: number): SeenLease => ({
  holder,
  token,
  sinceMs,
  deadlineMs,
});
const look = (entries: Array<[string, SeenLease]>): LeaseLook => new Map(entries);

describe("Status page: lease transitions from two looks", () => {
  it("tells a grant, a renewal (nothing), a handover after expiry, a handover after release, and a re-grant", () => {
    const before = look([
      ["a", lease("host-1", 10, T0 - 5000, T0 + 2000)],
      ["b", lease("host-1", 20, T0 - 5000, T0 + 2000)],
      ["c", lease("host-2", 30, T0 - 5000, T0 + 4000)],
      ["d", lease("host-3", 40, T0 - 5000, T0 + 3000)],
    ]);
    const after = look([
      ["a", lease("host-1", 10, T0 - 5000, T0 + 5500)], // renewed: same token
      ["b", lease("host-2", 21, T0 + 2100, T0 + 8100)], // after its deadline
      ["c", lease("host-3", 31, T0 + 1000, T0 + 7000)], // 3 s before its deadline
      ["d", lease("host-3", 41, T0 + 1500, T0 + 7500)], // the same holder, a new lease
      ["e", lease("host-4", 50, T0 + 900, T0 + 6900)],
    ]);
    const found = leaseTransitions(before, after, T0 + 2500);
    expect(found.map((t) => [t.shard, t.kind, t.from, t.to, t.at])).to.deep.equal([
      ["e", "granted", null, "host-4", "2026-12-01T03:00:00.900Z"],
      ["c", "handed over", "host-2", "host-3", "2026-12-01T03:00:01.000Z"],
      ["d", "granted again", "host-3", "host-3", "2026-12-01T03:00:01.500Z"],
      ["b", "handed over", "host-1", "host-2", "2026-12-01T03:00:02.100Z"],
    ]);
    expect(found.find((t) => t.shard === "b")!.text).to.equal(
      "b: handed over from host-1 to host-2 (host-1's lease had expired)",
    );
    expect(found.find((t) => t.shard === "c")!.text).to.equal(
      "c: handed over from host-2 to host-3 (host-2 released it)",
    );
  });

  it("tells an expiry (at its deadline) from a release (at the look), and the first look says only who holds what", () => {
    const before = look([
      ["x", lease("host-1", 10, T0 - 5000, T0 + 1000)],
      ["y", lease("host-2", 20, T0 - 5000, T0 + 5000)],
    ]);
    const found = leaseTransitions(before, look([]), T0 + 1500);
    expect(found.map((t) => [t.shard, t.kind, t.at, t.text])).to.deep.equal([
      ["x", "expired", "2026-12-01T03:00:01.000Z", "x: host-1's lease expired; nobody holds it"],
      ["y", "released", "2026-12-01T03:00:01.500Z", "y: released by host-2; nobody holds it"],
    ]);
    const first = leaseTransitions(null, before, T0);
    expect(first.map((t) => [t.shard, t.kind, t.to])).to.deep.equal([
      ["x", "holding", "host-1"],
      ["y", "holding", "host-2"],
    ]);
  });
});

const snapshot = (overrides: Partial<StatusSnapshot> = {}): StatusSnapshot => ({
  at: "2026-12-01T03:00:10.000Z",
  shards: [
    {
      name: "rack-a",
      count: 200,
      description: "",
      lease: { holder: "host-a", token: 1234, ttl_ms: 5000, since: "2026-12-01T03:00:00.000Z" },
      feed_lag_ms: 0,
    },
    {
      name: "rack-b",
      count: 10,
      description: "",
      lease: { holder: "host-b", token: 99, ttl_ms: 1500, since: "2026-12-01T02:59:00.000Z" },
      feed_lag_ms: 2500,
    },
    { name: "rack-c", count: 0, description: "", lease: null, feed_lag_ms: 0 },
  ],
  agents: [
    {
      id: "host-a",
      last_seen: "2026-12-01T03:00:08.000Z",
      age_ms: 2000,
      up: true,
      shards: ["rack-a"],
      serves: ["rack-a"],
      legacy_pool: false,
    },
  ],
  down_after_ms: 60_000,
  ironic: {
    configured: true,
    durable: false,
    pending_changes: 3,
    oldest_pending_ms: 4200,
    batches: { delivered: 1, retried: 0, given_up: 0 },
  },
  ...overrides,
});

describe("Status page: the model the page draws", () => {
  it("uses the status command's words, leaves tokens out, and rates the time left against the TTL", () => {
    const model = pageModel(snapshot(), () => 6000);
    expect(model.headline).to.equal("2 of 3 shards held, 1 of 1 agents up (down after 60 s silent)");
    expect(model.ironic).to.match(/^Ironic delivery: 3 trait changes pending, the oldest 4\.2 s;/);
    expect(model.ironic_lag_ms).to.equal(4200);
    expect(model.shards.map((s) => [s.shard, s.holder, s.left, s.health, s.feedLag])).to.deep.equal([
      ["rack-a", "host-a", "5.0 s", "renewing", "caught up"],
      ["rack-b", "host-b", "1.5 s", "ending", "2.5 s"],
      ["rack-c", "-", "-", null, "caught up"],
    ]);
    expect(model.shards[0]!.left_fraction).to.be.closeTo(5 / 6, 1e-9);
    expect(model.shards.map((s) => s.unsharded)).to.deep.equal([false, false, false]);
    const pool = pageModel(
      snapshot({ shards: [{ name: "None", count: 35, description: "", lease: null, feed_lag_ms: null }] }),
      () => 6000,
    ).shards[0]!;
    expect(pool).to.include({ shard: "None", unsharded: true, held: false, health: null });
    expect(model.shards[0]!.since).to.equal("03:00:00 (10 s ago)");
    expect(JSON.stringify(model)).not.to.include("1234");
    expect(model.agents).to.deep.equal([
      { agent: "host-a", state: "up", holds: "rack-a", serves: "rack-a", lastSeen: "2 s ago", up: true },
    ]);
  });
});

describe("Status page: a large fleet's snapshot", () => {
  it("is encoded as pageModel's JSON, a few hundred rows per turn of the event loop", async () => {
    const base = snapshot();
    const big = snapshot({
      shards: Array.from({ length: 3000 }, (_, i) => ({ ...base.shards[i % 3]!, name: `rack-${i}` })),
      agents: Array.from({ length: 3000 }, (_, i) => ({ ...base.agents[0]!, id: `host-${i}` })),
    });
    let turns = 0;
    const counting = () => {
      turns++;
      probe = setImmediate(counting);
    };
    let probe = setImmediate(counting);
    const text = await encodePageModel(big, () => 6000);
    clearImmediate(probe);
    expect(text).to.equal(JSON.stringify(pageModel(big, () => 6000)));
    // 6,000 rows at 250 a turn: the loop ran between them
    expect(turns).to.be.at.least(20);
  });
});

describe("Status page: sessions", () => {
  const authority = new TokenAuthority({
    tokens: [
      { role: "viewer", token: "viewer-token-0123456789" },
      { role: "admin", token: "admin-token-0123456789" },
      { role: "agent", agent: "host-a", token: "agent-token-0123456789" },
      { role: "inspector", token: "inspector-token-0123456789" },
    ],
  });
  const now = Date.now();

  it("opens one for a viewer or an admin, holding neither token, good until it lapses", () => {
    for (const token of ["viewer-token-0123456789", "admin-token-0123456789"]) {
      const cookie = authority.openPageSession(token, now + 60_000);
      expect(cookie).not.to.include(token);
      expect(authority.pageSession(cookie, now)?.principal.role).to.equal(token.split("-")[0]);
      expect(authority.pageSession(cookie, now + 61_000)).to.equal(null);
    }
  });

  it("refuses an agent or the inspector (403), an unknown token (401), and a forged or altered cookie", () => {
    for (const [token, status] of [
      ["agent-token-0123456789", 403],
      ["inspector-token-0123456789", 403],
      ["unknown-token-0123456789", 401],
    ] as const)
      expect(() => authority.openPageSession(token, now + 60_000))
        .to.throw()
        .with.property("status", status);
    const cookie = authority.openPageSession("viewer-token-0123456789", now + 60_000);
    const [id, expires, mac] = cookie.split(".");
    const later = String(Number(expires) + 86_400);
    for (const forged of [
      `${id}.${later}.${mac}`, // a longer session
      `${id}.${expires}.${mac!.slice(0, -2)}AA`,
      `${id}.${expires}`,
      `x${id}.${expires}.${mac}`,
      `${cookie}.more`,
      "",
      undefined,
    ])
      expect(authority.pageSession(forged, now), String(forged)).to.equal(null);
    // Another bridge with the same tokens file takes it; one whose file dropped the token does not.
    const same = new TokenAuthority({ tokens: [{ role: "viewer", token: "viewer-token-0123456789" }] });
    expect(same.pageSession(cookie, now)?.principal.role).to.equal("viewer");
    const dropped = new TokenAuthority({ tokens: [{ role: "admin", token: "admin-token-0123456789" }] });
    expect(dropped.pageSession(cookie, now)).to.equal(null);
  });
});

/** A page as the watcher sees it: what it was sent, and whether it takes more now. */
class TestViewer implements Viewer {
  readonly received: string[] = [];
  full = false;
  private drainListener: (() => void) | null = null;
  write(text: string): boolean {
    this.received.push(text);
    return !this.full;
  }
  once(_event: "drain", listener: () => void) {
    this.drainListener = listener;
    return this;
  }
  drain() {
    this.full = false;
    this.drainListener?.();
  }
  events(kind: string) {
    return this.received
      .join("")
      .split("\n\n")
      .filter((e) => e.includes(`event: ${kind}\n`));
  }
}

describe("Status page: one watcher per bridge (on a virtual clock)", () => {
  it("looks once per period for any number of pages, one look at a time, and stops after the last page leaves", async () => {
    const clock = new VirtualClock();
    let looks = 0;
    let inFlight = 0;
    let overlapped = false;
    const watcher = new StatusWatcher(
      async () => {
        looks++;
        inFlight++;
        if (inFlight > 1) overlapped = true;
        await new Promise((r) => clock.set(() => r(undefined), 30)); // a look slower than the period
        inFlight--;
        return snapshot({ at: new Date().toISOString() });
      },
      () => 6000,
      { periodMs: 20, lingerMs: 0, clock },
    );
    const pages = Array.from({ length: 8 }, () => new TestViewer());
    for (const page of pages) watcher.add(page);
    // Looks start at 0, 50, 100, 150 and 200 ms (30 ms a look, then the 20 ms period), one
    // for all 8 pages; the fifth is still under way at 200 ms.
    await clock.advance(200);
    expect(looks).to.equal(5);
    for (const page of pages) expect(page.events("snapshot")).to.have.length(4);
    expect(overlapped).to.equal(false);
    expect(pages[0]!.events("history")).to.have.length(1);
    for (const page of pages) watcher.remove(page);
    await clock.advance(1000);
    expect(looks).to.equal(5); // the look under way ends; none starts after it
    watcher.close();
  });

  it("skips a page that does not read, then catches it up with the latest snapshot and the whole history", async () => {
    const clock = new VirtualClock();
    let holder = "host-a";
    let token = 1;
    const watcher = new StatusWatcher(
      async () =>
        snapshot({
          at: new Date().toISOString(),
          shards: [
            {
              name: "rack",
              count: 1,
              description: "",
              lease: { holder, token, ttl_ms: 5000, since: new Date().toISOString() },
              feed_lag_ms: 0,
            },
          ],
        }),
      () => 6000,
      { periodMs: 10, lingerMs: 0, clock },
    );
    const slow = new TestViewer();
    const quick = new TestViewer();
    watcher.add(quick);
    watcher.add(slow);
    await clock.advance(0); // the first look, as the pages open
    expect(slow.events("snapshot")).to.have.length(1);
    slow.full = true;
    const sentBefore = slow.received.length;
    await clock.advance(40); // four looks more
    expect(quick.events("snapshot")).to.have.length(5);
    expect(slow.received.length - sentBefore).to.be.at.most(1); // the write that found it full
    holder = "host-b";
    token = 2;
    // the first look's "holding", then the handover
    await clock.advance(10);
    expect(quick.events("transition")).to.have.length(2);
    expect(slow.events("transition")).to.have.length(1);
    slow.drain();
    const history = slow.events("history").at(-1)!;
    expect(history).to.include("rack: handed over from host-a to host-b");
    expect(slow.events("snapshot").at(-1)).to.include('"holder":"host-b"');
    watcher.remove(quick);
    watcher.remove(slow);
    watcher.close();
  });

  it("says so on every page when a look fails, and goes on looking", async () => {
    const clock = new VirtualClock();
    let fail = true;
    const watcher = new StatusWatcher(
      async () => {
        if (fail) throw new Error("store unreachable");
        return snapshot({ at: new Date().toISOString() });
      },
      () => 6000,
      { periodMs: 10, lingerMs: 0, clock },
    );
    const page = new TestViewer();
    watcher.add(page);
    await clock.advance(0);
    expect(page.events("trouble")).to.have.length(1);
    expect(page.events("trouble")[0]).to.include("store unreachable");
    fail = false;
    await clock.advance(10);
    expect(page.events("snapshot")).to.have.length(1);
    watcher.remove(page);
    watcher.close();
  });
});
