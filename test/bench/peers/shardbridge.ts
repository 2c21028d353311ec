import { rmSync } from "node:fs";
import { BridgeClient } from "../../../src/agent/bridge-client.js";
import { bridgeKeeper, type LeaseClient, type LeaseKeeper } from "../../../src/core/keeper/lease-keeper.js";
import { AgentProcess } from "../../helpers/agent-process.js";
import { KeepAlivePool, poolTransport } from "../keepalive-client.js";
import { startBridge, type BridgeProcess } from "../../helpers/bridge-process.js";
import { acquireWhenReady } from "../../helpers/leases.js";
import { runWrk } from "../load.js";
import { TestRedisServer } from "../../helpers/redis-server.js";
import {
  deferred,
  killing,
  holderOf,
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

/**
 * shardbridge as operators run it: the compiled bridge (make bench builds it) in its own
 * process on a private redis-server, every shard defined with a TTL of 6 s, and the agents'
 * side as the shipped agent runs it — a LeaseKeeper from bridgeKeeper() over its own BridgeClient (one
 * per agent, each with its own token), renewing at TTL/3, standbys waiting at the bridge
 * (wait_ms) rather than polling. The fleet's clients send through keep-alive pools
 * (poolTransport), as `make bench scale` does: up to RENEW_SOCKETS_MAX sockets for renews,
 * a socket of its own for each acquire waiting at the bridge. fetch costs this process
 * 0.3-0.5 ms of CPU a request, which a real fleet spends on thousands of hosts, not one:
 * with it, 10,000 agents took more than this machine's two cores and the bench measured
 * its own event loop (docs/PERFORMANCE-LOG.md).
 */
/** the agent's client's own timeout a request (BridgeClient's default) */
const CLIENT_TIMEOUT_MS = 2000;
/**
 * The renews' keep-alive sockets, at most (BENCH_PEERS_RENEW_SOCKETS, default 1,024): a
 * real fleet has one connection an agent, and the holders granted together when the
 * store's recovery ends renew together, each TTL/3. On 64 sockets such a burst queued in
 * this process for up to 150 ms (renew p50 38 ms at 1,000 shards, against 3.6 ms through
 * fetch's unbounded pool). At 10,000 shards the cap decides where the burst waits — in
 * this process's queue, or at the bridge — and the figures move with it
 * (docs/PERFORMANCE-LOG.md, 2026-12-07).
 */
const RENEW_SOCKETS_MAX = Number(process.env.BENCH_PEERS_RENEW_SOCKETS ?? 1024);

export async function startShardbridge(shards: string[]): Promise<Peer> {
  const redis = await TestRedisServer.start();
  let bridge: BridgeProcess;
  try {
    bridge = await startBridge({
      shards: shards.map((name) => ({ name, lease_ttl_ms: TTL_MS })),
      agents: shards.flatMap((shard) => [holderOf(shard), standbyOf(shard)]),
      store: redis.url,
      env: { SHARDBRIDGE_LOG_LEVEL: "warn" },
    });
  } catch (error) {
    await redis.stop();
    throw error;
  }
  // Should this process end without its finally (an exception in a callback), the folder goes too.
  const dir = bridge.dir;
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const keeperOf = (shard: string, agent: string, client: LeaseClient = clientOf(agent)) =>
    bridgeKeeper(client, shard, agent);
  const clientOf = (agent: string) => new BridgeClient(bridge.url, bridge.tokenOf(agent));
  const { hostname, port } = new URL(bridge.url);
  const poolOf = (sockets: number) =>
    new KeepAlivePool(() => ({ host: hostname, port: Number(port) }), sockets, CLIENT_TIMEOUT_MS);

  return {
    name: "shardbridge",
    serverPids: () => [bridge.serve.child.pid!, redis.pid!],

    async startFleet(fleet: string[], renews: RenewLog): Promise<Stoppable> {
      const holders: LeaseKeeper[] = [];
      const standbys: LeaseKeeper[] = [];
      // Renews and plain acquires share a few sockets; an acquire that waits at the bridge
      // (a standby's, or a holder's while the store recovers) holds a socket of its own
      // for its wait: queued behind one, renews would miss their deadline.
      const renewing = poolOf(Math.min(fleet.length, RENEW_SOCKETS_MAX));
      const waiting = poolOf(fleet.length);
      const transport = poolTransport((request) =>
        request.timeoutMs > CLIENT_TIMEOUT_MS ? waiting : renewing,
      );
      // Standbys first: a holder's release would otherwise hand its lease to a standby on its way out.
      const stopped = {
        stop: async () => {
          await stopAll(standbys);
          await stopAll(holders);
          renewing.destroy();
          waiting.destroy();
        },
      };
      try {
        const tally = { active: 0, standby: 0 };
        const start = (shard: string, agent: string, into: LeaseKeeper[]) => {
          const client = new BridgeClient(bridge.url, bridge.tokenOf(agent), CLIENT_TIMEOUT_MS, transport);
          const keeper = keeperOf(shard, agent, client);
          keeper.on("renewed", (e) => renews.record(e.latencyMs));
          keeper.on("lost", () => renews.lost());
          keeper.on("active", () => tally.active++);
          // A holder stands by too while the store recovers: only the standbys' count. A
          // standby whose holder lost its lease holds instead (the loss is counted above).
          if (into === standbys) {
            let counted = false;
            const count = () => {
              if (!counted) tally.standby++;
              counted = true;
            };
            keeper.once("standby", count);
            keeper.once("active", count);
          }
          into.push(keeper.start());
        };
        // The bridge grants nothing for one TTL after its store's start: the first fleet waits that out.
        await spread(fleet, (shard) => start(shard, holderOf(shard), holders));
        await untilCount("shardbridge holders active", () => tally.active, fleet.length, 3 * TTL_MS + 60_000);
        await spread(fleet, (shard) => start(shard, standbyOf(shard), standbys));
        await untilCount(
          "shardbridge standbys standing by (or holding)",
          () => tally.standby,
          fleet.length,
          60_000,
        );
        return stopped;
      } catch (error) {
        await stopped.stop();
        throw error;
      }
    },

    async saturate(callers: number, seconds: number): Promise<number> {
      const leases = await Promise.all(
        Array.from({ length: callers }, async (_, c) => {
          const shard = `sat-${c}`;
          const agent = holderOf(shard);
          const client = clientOf(agent);
          return { client, shard, agent, token: await acquireWhenReady(client, shard, agent) };
        }),
      );
      try {
        // wrk (C), as the project's HTTP benches drive the bridge: a Node client here costs
        // more per request than the bridge does, and would be the limit.
        const requests = leases.map(({ shard, agent, token }) => ({
          method: "POST",
          path: `/v1/shards/${shard}/lease`,
          headers: { authorization: `Bearer ${bridge.tokenOf(agent)}`, "content-type": "application/json" },
          body: JSON.stringify({ agent, token }),
        }));
        const options = { url: bridge.url, requests, connections: callers, threads: 1 };
        await runWrk({ ...options, durationS: 1 });
        const run = await runWrk({ ...options, durationS: seconds });
        if (run.non2xx > 0 || run.errors > 0)
          throw new Error(`wrk: ${run.non2xx} answers not 2xx, ${run.errors} socket errors`);
        return run.rps;
      } finally {
        await Promise.all(leases.map(({ client, ...lease }) => client.release(lease)));
      }
    },

    async failoverPair(shard: string): Promise<FailoverPair> {
      const holder = AgentProcess.spawnFixture(holderOf(shard), [
        ...["--bridge", bridge.url, "--token", bridge.tokenOf(holderOf(shard))],
        ...["--shard", shard, "--agent", holderOf(shard), "--write-every", "3600000"],
      ]);
      let standby: LeaseKeeper | undefined;
      try {
        await holder.waitFor((e) => e.ev === "active", 3 * TTL_MS + 30_000);
        // Standing by means its waiting acquire is at the bridge: the client says when one leaves.
        const waiting = deferred<void>();
        const client = clientOf(standbyOf(shard));
        const watched: LeaseClient = {
          acquire: (request) => {
            if ((request.waitMs ?? 0) > 0) waiting.resolve();
            return client.acquire(request);
          },
          renew: (request) => client.renew(request),
          release: (request) => client.release(request),
        };
        const holds = deferred<number>();
        standby = keeperOf(shard, standbyOf(shard), watched);
        standby.once("active", () => holds.resolve(performance.now()));
        standby.start();
        await waiting.promise;
        await new Promise((r) => setTimeout(r, 50));
        const keeper = standby;
        return { holder, standbyHolds: holds.promise, stop: () => stopAll([keeper, killing(holder)]) };
      } catch (error) {
        await stopAll([standby, killing(holder)]);
        throw error;
      }
    },

    stop: () => stopAll([bridge, redis]),
  };
}
