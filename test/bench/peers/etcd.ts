import { fileURLToPath } from "node:url";
import { Etcd3, type Lease, type Watcher } from "etcd3";
import { AgentProcess } from "../../helpers/agent-process.js";
import {
  AGENTS_PER_CLIENT,
  failoverPairOf,
  holderOf,
  spread,
  standbyOf,
  stopAll,
  timedLoop,
  TTL_MS,
  untilCount,
  type FailoverPair,
  type Peer,
  type RenewLog,
  type Stoppable,
} from "./common.js";
import { EtcdServer } from "./etcd-server.js";

const HOLDER = fileURLToPath(new URL("./holder.ts", import.meta.url));

/**
 * One agent of the leader-election recipe on etcd: a lease of its own (granted with the
 * TTL, kept alive by the client at TTL/3 on its keep-alive stream), and the shard's key
 * put under that lease by whoever takes it — a transaction that creates the key only
 * where it is absent. A standby watches the key from the revision it lost at and tries
 * again each time the key goes (its holder revoked the lease, or it expired).
 */
export class EtcdMember {
  holding = false;
  private lease: Lease | undefined;
  private watcher: Watcher | undefined;
  private firedAt = 0;
  private closed = false;

  constructor(
    private readonly client: Etcd3,
    private readonly shard: string,
    private readonly agent: string,
    private readonly on: {
      /** a holder's keep-alive answered, with its round trip */
      renewed?: (ms: number) => void;
      holds?: () => void;
      standsBy?: () => void;
      lost?: (error: Error) => void;
    } = {},
  ) {}

  private get key(): string {
    return `shards/${this.shard}/leader`;
  }

  async start(): Promise<void> {
    const lease = this.client.lease(TTL_MS / 1000);
    this.lease = lease;
    lease.on("keepaliveFired", () => (this.firedAt = performance.now()));
    lease.on("keepaliveSucceeded", () => {
      if (this.holding) this.on.renewed?.(performance.now() - this.firedAt);
    });
    lease.on("lost", (error) => {
      if (!this.closed) this.on.lost?.(error);
    });
    await lease.grant();
    await this.take();
  }

  private async take(): Promise<void> {
    if (this.closed || this.holding) return;
    const id = await this.lease!.grant();
    const answer = await this.client
      .if(this.key, "Create", "==", 0)
      .then(this.client.put(this.key).value(this.agent).lease(id))
      .commit();
    if (answer.succeeded) {
      this.holding = true;
      this.on.holds?.();
      return;
    }
    if (this.watcher !== undefined) return;
    // From the next revision: a delete between this transaction and the watch is not missed.
    const watcher = await this.client
      .watch()
      .key(this.key)
      .startRevision(String(Number(answer.header.revision) + 1))
      .create();
    this.watcher = watcher;
    watcher.on("delete", () => void this.take().catch((error: unknown) => this.on.lost?.(error as Error)));
    watcher.on("error", (error) => this.on.lost?.(error));
    this.on.standsBy?.();
  }

  /** Stop keeping the lease alive; `revoke` hands the key back at once, else it expires with the lease. */
  async stop(revoke = false): Promise<void> {
    this.closed = true;
    await this.watcher?.cancel();
    if (revoke) await this.lease?.revoke();
    else this.lease?.release();
  }
}

export async function startEtcd(): Promise<Peer> {
  const server = await EtcdServer.start();
  const connect = () => new Etcd3({ hosts: server.url });
  const closing = (client: Etcd3): Stoppable => ({ stop: async () => client.close() });
  // the saturation's callers: one client, its connection carrying a keep-alive stream each
  const client = connect();

  return {
    name: "etcd",
    serverPids: () => [server.pid],

    async startFleet(fleet: string[], renews: RenewLog): Promise<Stoppable> {
      const all: EtcdMember[] = [];
      const clients: Etcd3[] = [];
      const stopped = {
        stop: async () => {
          await stopAll(all.map((m) => ({ stop: () => m.stop() })));
          await stopAll(clients.map(closing));
        },
      };
      try {
        const tally = { holds: 0, standsBy: 0 };
        const failed: Error[] = [];
        const start = (shard: string, agent: string) => {
          const client = (clients[Math.floor(all.length / AGENTS_PER_CLIENT)] ??= connect());
          const member = new EtcdMember(client, shard, agent, {
            renewed: (ms) => renews.record(ms),
            holds: () => tally.holds++,
            standsBy: () => tally.standsBy++,
            lost: () => renews.lost(),
          });
          all.push(member);
          member.start().catch((error: unknown) => failed.push(error as Error));
        };
        const check = () => {
          if (failed.length > 0) throw failed[0]!;
          return tally.holds;
        };
        await spread(fleet, (shard) => start(shard, holderOf(shard)));
        await untilCount("etcd holders holding", check, fleet.length, 60_000);
        await spread(fleet, (shard) => start(shard, standbyOf(shard)));
        await untilCount("etcd standbys watching", () => (check(), tally.standsBy), fleet.length, 60_000);
        return stopped;
      } catch (error) {
        await stopped.stop();
        throw error;
      }
    },

    async saturate(callers: number, seconds: number): Promise<number> {
      // Through the etcd3 client (no C client of etcd's API is packaged in Debian): a
      // keep-alive stream of its own per lease, each call one request and its answer, as
      // the client's keep-alive sends them.
      const streams = await Promise.all(
        Array.from({ length: callers }, async () => {
          const { ID } = await client.leaseClient.leaseGrant({ TTL: TTL_MS / 1000 });
          const stream = await client.leaseClient.leaseKeepAlive();
          let answered: (() => void) | null = null;
          stream.on("data", () => {
            const done = answered;
            answered = null;
            done?.();
          });
          stream.on("error", () => undefined);
          const renew = () =>
            new Promise<void>((resolve) => {
              answered = resolve;
              stream.write({ ID });
            });
          return { ID, stream, renew };
        }),
      );
      try {
        await timedLoop(
          1,
          streams.map((s) => s.renew),
        );
        return await timedLoop(
          seconds,
          streams.map((s) => s.renew),
        );
      } finally {
        for (const { stream } of streams) stream.end();
        await Promise.all(streams.map(({ ID }) => client.leaseClient.leaseRevoke({ ID })));
      }
    },

    async failoverPair(shard: string): Promise<FailoverPair> {
      const holder = AgentProcess.spawnCommand(holderOf(shard), process.execPath, [
        ...["--import", "tsx", HOLDER, "--peer", "etcd", "--url", server.url],
        ...["--shard", shard, "--agent", holderOf(shard)],
      ]);
      // the standby's own client, as its host has
      const own = connect();
      return failoverPairOf(
        holder,
        async (events) => {
          const member = new EtcdMember(own, shard, standbyOf(shard), events);
          await member.start();
          return member;
        },
        () => own.close(),
      );
    },

    stop: async () => {
      client.close();
      await server.stop();
    },
  };
}
