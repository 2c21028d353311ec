import { expect } from "chai";
import { LeaseKeeper, type LeaseClient } from "../../src/core/keeper/lease-keeper.js";
import { seededRandom } from "../../src/runtime/random.js";
import { SimHost } from "../../src/tools/sim/host.js";
import { clockChanged, runSettled, simScheduler } from "../../src/tools/sim/keeper-scheduler.js";
import { EventQueue } from "../../src/tools/sim/queue.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";

/*
 * The shipped LeaseKeeper — its timers, its timeout on each request, its release on stop —
 * on the simulator's virtual clock (simScheduler), over the embedded store on the same
 * clock: seconds of faults in milliseconds of test, the same every run.
 */

const S = 1_000_000;
const TTL_MS = 3000;
const LATENCY_US = 1000;

/** One agent on the virtual clock: its host, a link to the store that can be cut, its keeper, what it reported when and when its renews were answered. */
interface SimAgent {
  host: SimHost;
  link: { cut: boolean };
  keeper: LeaseKeeper;
  log: Array<{ atUs: number; what: string }>;
  /** when each renew's answer came */
  renewedAt: number[];
}

function fleet(names: string[]): { queue: EventQueue; agents: SimAgent[] } {
  const queue = new EventQueue();
  // The store reads true time in whole microseconds, as Redis TIME does; its history began long ago.
  const store = new MemoryLeases(() => Math.floor(queue.now), -3600 * S);
  const agents = names.map((name, index): SimAgent => {
    const host = new SimHost(index, name, queue);
    const link = { cut: false };
    /** A request reaches the store a latency later, its answer the agent another; a cut link loses both. */
    const overLink = <T>(call: () => Promise<T>): Promise<T> =>
      new Promise((resolve) => {
        if (link.cut) return;
        queue.at(queue.now + LATENCY_US, () => {
          void call().then((answer) => {
            if (!link.cut) host.later(queue.now + LATENCY_US, () => resolve(answer));
          });
        });
      });
    const client: LeaseClient = {
      acquire: (req) => overLink(() => store.acquire(req)),
      renew: (req) => overLink(() => store.renew(req)),
      release: (req) => overLink(() => store.release(req)),
    };
    const keeper = new LeaseKeeper({
      client,
      shard: "s",
      agent: name,
      ttlMs: TTL_MS,
      scheduler: simScheduler(host),
      random: seededRandom(index + 1),
    });
    const log: SimAgent["log"] = [];
    keeper.on("active", () => log.push({ atUs: queue.now, what: "active" }));
    keeper.on("lost", (e) => log.push({ atUs: queue.now, what: `lost ${e.reason}` }));
    keeper.on("released", () => log.push({ atUs: queue.now, what: "released" }));
    keeper.on("store-error", (e) => log.push({ atUs: queue.now, what: `store-error ${e.op}: ${e.error}` }));
    const renewedAt: number[] = [];
    keeper.on("renewed", () => renewedAt.push(queue.now));
    return { host, link, keeper, log, renewedAt };
  });
  return { queue, agents };
}

/** Agents a and b on one shard, 5 s in: a started first and holds the lease, b stands by. */
async function holderAndStandby(): Promise<{ queue: EventQueue; a: SimAgent; b: SimAgent }> {
  const { queue, agents } = fleet(["a", "b"]);
  const [a, b] = agents as [SimAgent, SimAgent];
  a.keeper.start();
  await runSettled(queue, 0.1 * S);
  b.keeper.start();
  await runSettled(queue, 5 * S);
  return { queue, a, b };
}

describe("LeaseKeeper on the simulator's clock (simScheduler)", () => {
  it("a frozen holder's timers wait for its thaw, and it stops at its deadline; the standby takes over a TTL after the last renew", async () => {
    const { queue, a, b } = await holderAndStandby();
    expect([a.keeper.status, b.keeper.status]).to.deep.equal(["active", "standby"]);
    a.host.freeze(15 * S);
    await runSettled(queue, 20 * S);

    // A renews every second: its last renew left within a second before the freeze, and
    // the store let the lease run a TTL from then. B polls every half second at most.
    const bActive = b.log.find((e) => e.what === "active")!.atUs;
    expect(bActive).to.be.within(7 * S, 8 * S + 0.5 * S + 2 * LATENCY_US);
    // A hears nothing while frozen; at the thaw its deadline has long passed.
    expect(a.log.filter((e) => e.atUs > 5 * S)).to.deep.equal([{ atUs: 15 * S, what: "lost deadline" }]);
    expect(a.keeper.token()).to.equal(null);
    expect(b.keeper.token()).to.be.a("number");
  });

  it("stop hands the lease back: the standby takes it within a poll, not a TTL", async () => {
    const { queue, a, b } = await holderAndStandby();
    // stop() resolves once the release is answered, which takes the queue's running.
    const stopped = a.keeper.stop();
    await runSettled(queue, 10 * S);
    await stopped;
    expect(a.log.at(-1)).to.deep.equal({ atUs: 5 * S + 2 * LATENCY_US, what: "released" });
    const bActive = b.log.find((e) => e.what === "active")!.atUs;
    expect(bActive - 5 * S).to.be.within(LATENCY_US, 0.5 * S + 3 * LATENCY_US);
  });

  it("a host's clock that speeds up moves the timers already set: the next renew comes when its clock reads the time, not at the old pace", async () => {
    const { queue, agents } = fleet(["a"]);
    const [a] = agents as [SimAgent];
    a.keeper.start();
    // Renews leave each second of a's clock from 0; the one of 5 s has left.
    await runSettled(queue, 5.25 * S);
    a.host.setRate(2);
    clockChanged(a.host);
    await runSettled(queue, 7 * S);
    const renewed = a.renewedAt.filter((atUs) => atUs > 5.25 * S);
    // a's clock reads 6 s at 5.625 s now (0.75 s of it at twice the pace), then each second
    // of it is half of one; the answers come a round trip later.
    expect(renewed).to.deep.equal([5.625 * S, 6.125 * S, 6.625 * S].map((t) => t + 2 * LATENCY_US));
  });

  it("a renew nobody answers times out on the virtual clock, and the holder stops at its deadline", async () => {
    const { queue, agents } = fleet(["a"]);
    const [a] = agents as [SimAgent];
    a.keeper.start();
    await runSettled(queue, 5 * S);
    a.link.cut = true;
    await runSettled(queue, 10 * S);
    // Renews leave each second, from when the first grant's request left (0 s): the one
    // of 5 s reaches the store but its answer is lost, so the last answered one left at
    // 4 s and the deadline is 2/3 TTL after it. The renew in flight was given until then.
    const late = a.log.filter((e) => e.atUs > 5 * S && e.atUs < 7 * S);
    expect(late).to.deep.equal([
      { atUs: 6 * S, what: "lost deadline" },
      { atUs: 6 * S, what: "store-error renew: Error: no answer within 1000 ms" },
    ]);
    expect(a.keeper.status).to.equal("standby");
  });
});
