import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";
import { AgentProcess } from "../../helpers/agent-process.js";
import { TestRedisServer } from "../../helpers/redis-server.js";
import {
  AGENTS_PER_CLIENT,
  failoverPairOf,
  holderOf,
  RENEW_EVERY_MS,
  spread,
  standbyOf,
  stopAll,
  TTL_MS,
  untilCount,
  type FailoverPair,
  type Peer,
  type RenewLog,
  type Stoppable,
} from "./common.js";

const HOLDER = fileURLToPath(new URL("./holder.ts", import.meta.url));

/** How often a standby tries SET NX: redlock's retry (200 ms + up to 200 ms of jitter) is of this order. */
export const POLL_MS = 500;

/** The compare-and-extend redlock-style libraries send to renew: only the holder's value is extended. */
const EXTEND = `if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end`;
/** Their release: the key deleted only while it still holds this holder's value. */
const RELEASE = `if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end`;

/** The scripts' SHA1s: SCRIPT LOAD once, and every connection to that server calls them by it. */
export async function loadScripts(redis: Redis): Promise<{ extend: string; release: string }> {
  const extend = (await redis.script("LOAD", EXTEND)) as string;
  const release = (await redis.script("LOAD", RELEASE)) as string;
  return { extend, release };
}

/**
 * One agent of a Redis lock as redlock-style libraries keep it: `SET key me NX PX ttl` to
 * take, the compare-and-extend script every TTL/3 after the last renew sent, and — standing
 * by — SET NX again every POLL_MS (the first one at a random point of that, so that a
 * fleet's polls spread). A renew answered 0 (the key is gone or another's) loses the lease.
 */
export class LockMember {
  holding = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly redis: Redis,
    private readonly scripts: { extend: string; release: string },
    private readonly shard: string,
    private readonly agent: string,
    private readonly on: {
      renewed?: (ms: number) => void;
      holds?: () => void;
      /** its first SET NX found the key held */
      standsBy?: () => void;
      lost?: () => void;
    } = {},
  ) {}

  private get key(): string {
    return `lock:${this.shard}`;
  }

  start(firstPollMs = 0): void {
    this.later(firstPollMs, () => this.poll(true));
  }

  private later(ms: number, fn: () => Promise<void>): void {
    if (this.closed) return;
    // A call that failed (the connection, not the lock) is tried again: the TTL decides.
    const again = () =>
      this.holding ? this.later(100, () => this.renew()) : this.later(POLL_MS, () => this.poll(false));
    this.timer = setTimeout(() => void fn().catch(again), ms);
  }

  private async poll(first: boolean): Promise<void> {
    const sentAt = performance.now();
    const taken = await this.redis.set(this.key, this.agent, "PX", TTL_MS, "NX");
    if (this.closed) return;
    if (taken === "OK") {
      this.holding = true;
      this.on.holds?.();
      return this.later(sentAt + RENEW_EVERY_MS - performance.now(), () => this.renew());
    }
    if (first) this.on.standsBy?.();
    this.later(POLL_MS, () => this.poll(false));
  }

  private async renew(): Promise<void> {
    const sentAt = performance.now();
    const extended = await this.redis.evalsha(this.scripts.extend, 1, this.key, this.agent, TTL_MS);
    if (this.closed) return;
    if (extended === 1) {
      this.on.renewed?.(performance.now() - sentAt);
      return this.later(sentAt + RENEW_EVERY_MS - performance.now(), () => this.renew());
    }
    this.holding = false;
    this.on.lost?.();
    this.later(POLL_MS, () => this.poll(false));
  }

  /** Stop renewing; `release` deletes the key at once (if still ours), else it expires. */
  async stop(release = false): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    if (release && this.holding) await this.redis.evalsha(this.scripts.release, 1, this.key, this.agent);
  }
}

/** redis-benchmark's requests a second for `command` with `clients` connections (its --csv answer). */
function redisBenchmark(port: number, clients: number, requests: number, command: string[]): number {
  const run = spawnSync(
    "redis-benchmark",
    [
      "-h",
      "127.0.0.1",
      "-p",
      String(port),
      "-c",
      String(clients),
      "-n",
      String(requests),
      "--csv",
      ...command,
    ],
    { encoding: "utf8" },
  );
  if (run.status !== 0) throw new Error(`redis-benchmark failed: ${run.stderr}`);
  // "test","rps","avg_latency_ms",...
  const last = run.stdout.trim().split("\n").pop()!;
  const perS = Number(last.split(",")[1]?.replace(/"/g, ""));
  if (!Number.isFinite(perS)) throw new Error(`redis-benchmark said: ${run.stdout}`);
  return perS;
}

export async function startRedisLock(): Promise<Peer> {
  const server = await TestRedisServer.start();
  const closing = (client: Redis): Stoppable => ({ stop: async () => client.disconnect() });
  // the saturation's callers: one connection, as a redlock instance shares its client
  const redis = server.client();
  const scripts = await loadScripts(redis);

  return {
    name: "redis lock",
    serverPids: () => [server.pid!],

    async startFleet(fleet: string[], renews: RenewLog): Promise<Stoppable> {
      const all: LockMember[] = [];
      const clients: Redis[] = [];
      const stopped = {
        stop: async () => {
          await stopAll(all.map((m) => ({ stop: () => m.stop() })));
          await stopAll(clients.map(closing));
        },
      };
      try {
        const tally = { holds: 0, standsBy: 0 };
        const start = (shard: string, agent: string) => {
          const client = (clients[Math.floor(all.length / AGENTS_PER_CLIENT)] ??= server.client());
          const member = new LockMember(client, scripts, shard, agent, {
            renewed: (ms) => renews.record(ms),
            holds: () => tally.holds++,
            standsBy: () => tally.standsBy++,
            lost: () => renews.lost(),
          });
          all.push(member);
          member.start(agent === holderOf(shard) ? 0 : Math.random() * POLL_MS);
        };
        await spread(fleet, (shard) => start(shard, holderOf(shard)));
        await untilCount("redis lock holders holding", () => tally.holds, fleet.length, 60_000);
        await spread(fleet, (shard) => start(shard, standbyOf(shard)));
        await untilCount("redis lock standbys polling", () => tally.standsBy, fleet.length, 60_000);
        return stopped;
      } catch (error) {
        await stopped.stop();
        throw error;
      }
    },

    async saturate(callers: number, seconds: number): Promise<number> {
      // redis-benchmark (C) sends the extend script, as the lease bench drives Redis: a Node
      // client would be the limit, not Redis. Each call extends one of `callers` locks.
      const keys = Array.from({ length: callers }, (_, c) => `lock:sat-${String(c).padStart(12, "0")}`);
      for (const key of keys) await redis.set(key, "sat", "PX", 60_000);
      try {
        const extend = (requests: number) =>
          redisBenchmark(server.port, callers, requests, [
            ...["-r", String(callers), "EVALSHA", scripts.extend, "1"],
            ...["lock:sat-__rand_int__", "sat", String(TTL_MS)],
          ]);
        const perS = extend(50_000); // warm-up, and the rate that sizes the measured run
        return extend(Math.round(perS * seconds));
      } finally {
        await redis.del(...keys);
      }
    },

    async failoverPair(shard: string): Promise<FailoverPair> {
      const holder = AgentProcess.spawnCommand(holderOf(shard), process.execPath, [
        ...["--import", "tsx", HOLDER, "--peer", "redis-lock", "--url", server.url],
        ...["--shard", shard, "--agent", holderOf(shard)],
      ]);
      // the standby's own connection, as its host has
      const own = server.client();
      return failoverPairOf(
        holder,
        async (events) => {
          const member = new LockMember(own, scripts, shard, standbyOf(shard), events);
          member.start();
          return member;
        },
        () => own.disconnect(),
      );
    },

    stop: async () => {
      redis.disconnect();
      await server.stop();
    },
  };
}
