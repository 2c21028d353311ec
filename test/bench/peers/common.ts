import { setTimeout as sleep } from "node:timers/promises";
import type { AgentProcess } from "../../helpers/agent-process.js";

/** What every peer's shards are given: shardbridge's default TTL, and the keeper's renew at TTL/3. */
export const TTL_MS = 6000;
export const RENEW_EVERY_MS = TTL_MS / 3;

/** One name scheme for every peer, so that each serves the same shards to the same agents. */
export const holderOf = (shard: string) => `${shard}-a`;
export const standbyOf = (shard: string) => `${shard}-b`;

/** The renews a fleet finished while the window was open: each one's latency; and the leases it lost. */
export class RenewLog {
  recording = false;
  readonly latenciesMs: number[] = [];
  /** leases a holder lost (a renew refused or too late), from the fleet's start */
  losses = 0;

  record(ms: number): void {
    if (this.recording) this.latenciesMs.push(ms);
  }

  lost(): void {
    this.losses++;
  }
}

export interface Stoppable {
  stop(): Promise<void>;
}

/** A holder in a child process, holding, and its standby in this process, standing by. */
export interface FailoverPair extends Stoppable {
  holder: AgentProcess;
  /** performance.now() when the standby holds the lease, as the standby itself sees it */
  standbyHolds: Promise<number>;
}

/** A lease service the bench started, and the leader-election recipe its agents follow. */
export interface Peer extends Stoppable {
  readonly name: string;
  /** the processes that serve it: their CPU is the server's */
  serverPids(): number[];
  /** each shard held by its holder, its standby standing by, every lease renewing at its own rate */
  startFleet(shards: string[], renews: RenewLog): Promise<Stoppable>;
  /**
   * Renews a second at saturation: `callers` callers in closed loops on leases of their own
   * for `seconds`, after a second of warm-up (connections open, code paths warm).
   */
  saturate(callers: number, seconds: number): Promise<number>;
  failoverPair(shard: string): Promise<FailoverPair>;
}

/**
 * Agents that share one client (one connection): a real fleet has one a host, more than a
 * bench process can open; and the etcd3 client, on a call that fails, resets every stream
 * of its connection, which would take a whole fleet's keep-alives down at once.
 */
export const AGENTS_PER_CLIENT = 50;

/** At most this many agents start a second: a burst of 10,000 leases granted at once times etcd out. */
const STARTS_PER_S = 1000;

/**
 * `start` called once for each item, spread evenly over whole renew intervals (as few as
 * STARTS_PER_S allows): a fleet whose members all started at once would renew in bursts,
 * which no real fleet does.
 */
export async function spread<T>(items: T[], start: (item: T) => void): Promise<void> {
  const intervals = Math.max(1, Math.ceil(items.length / ((STARTS_PER_S * RENEW_EVERY_MS) / 1000)));
  const began = performance.now();
  for (let i = 0; i < items.length; i++) {
    const due = began + (i / items.length) * intervals * RENEW_EVERY_MS;
    if (due > performance.now() + 5) await sleep(due - performance.now());
    start(items[i]!);
  }
}

/** Until `count()` reaches `want`, or an error naming `what` after `withinMs`. */
export async function untilCount(
  what: string,
  count: () => number,
  want: number,
  withinMs: number,
): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (count() < want) {
    if (performance.now() > deadline) throw new Error(`${what}: ${count()} of ${want} after ${withinMs} ms`);
    await sleep(50);
  }
}

/** `promise`, or an error naming `what` after `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise and the function that resolves it. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A child process as something to stop: killed (SIGKILL), and its exit waited for. */
export const killing = (child: AgentProcess): Stoppable => ({ stop: () => child.kill() });

/** Stop every one, even when some fail; the first failure is thrown after. */
export async function stopAll(items: Array<Stoppable | undefined>): Promise<void> {
  const present = items.filter((item): item is Stoppable => item !== undefined);
  const results = await Promise.allSettled(present.map((item) => item.stop()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed !== undefined) throw failed.reason;
}

/** Each op called again as soon as it is answered, for `seconds`: calls answered per second. */
export async function timedLoop(seconds: number, ops: Array<() => Promise<void>>): Promise<number> {
  const started = performance.now();
  const until = started + seconds * 1000;
  let done = 0;
  await Promise.all(
    ops.map(async (op) => {
      while (performance.now() < until) {
        await op();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

/** A standby of the failover rounds: told when it holds, and when it stands by. */
export interface PairedStandby {
  stop(release: boolean): Promise<void>;
}

/**
 * One failover round's pair on a peer whose holder is `holder` (a child process of
 * peers/holder.ts): once the holder is active, the standby `startStandby` makes on the
 * standby's own connection (`closeOwn` closes it), running until it stands by or holds.
 */
export async function failoverPairOf(
  holder: AgentProcess,
  startStandby: (events: { holds: () => void; standsBy: () => void }) => Promise<PairedStandby>,
  closeOwn: () => void,
): Promise<FailoverPair> {
  let standby: PairedStandby | undefined;
  try {
    await holder.waitFor((e) => e.ev === "active", 30_000);
    const holds = deferred<number>();
    const standing = deferred<void>();
    standby = await startStandby({
      holds: () => holds.resolve(performance.now()),
      standsBy: () => standing.resolve(),
    });
    await Promise.race([standing.promise, holds.promise]);
    const member = standby;
    return {
      holder,
      standbyHolds: holds.promise,
      stop: () => stopAll([{ stop: () => member.stop(true) }, killing(holder)]).finally(closeOwn),
    };
  } catch (error) {
    const started = standby;
    await stopAll([started === undefined ? undefined : { stop: () => started.stop(true) }, killing(holder)]);
    closeOwn();
    throw error;
  }
}
