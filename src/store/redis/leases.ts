import { hostKey } from "../../core/names.js";
import { ReplyError, type Redis } from "ioredis";
import type {
  FenceOutcome,
  LeaseOutcome,
  LeaseView,
  ReadOutcome,
  RefusalReason,
  ReleaseOutcome,
  StoreLineage,
} from "../../core/lease/machine.js";
import { sortAgents } from "../agents-order.js";
import type {
  AcquireInput,
  AgentLiveness,
  FenceInput,
  LeaseBackend,
  ReleaseInput,
  RenewInput,
  StoreTime,
} from "../ports/leases.js";
import { keyLayout, type KeyLayout } from "./keys.js";
import { scanKeys, type RedisClient, type RedisTopology } from "./connect.js";
import { RedisConnection, type RedisConnectionOptions } from "./connection.js";
import { LineageReadings } from "./lineage.js";
import { abandonedSince, readyBy, switchMark } from "./master-switch.js";
import {
  defineScripts,
  runScript,
  runScriptAcked,
  waitForReplicas,
  type ScriptClock,
  type ScriptName,
} from "./scripts.js";

export interface RedisBackendOptions extends RedisConnectionOptions {
  /** key namespace, default "sb" */
  namespace?: string;
  /** entries a shard's trait feed keeps (default FEED_MAX_ENTRIES; tests pass a small bound) */
  feedMaxEntries?: number;
  /** entries the Ironic queue holds before it folds (default IRONIC_QUEUE_MAX_ENTRIES) */
  ironicQueueMax?: number;
  /**
   * keep the lease directory (every shard granted, per agent its grants; default true):
   * the partition leases skip it, their holders being one-off worker names
   */
  leaseDirectory?: boolean;
  /** test-only: drive the scripts' clock (and the store's lineage) from the caller (differential test) */
  virtualClock?: { nowUs: () => number; bootUs: () => number; lineage?: () => StoreLineage | undefined };
}

/** The script reply shared by every lease script: see lease-common.lua. */
type LeaseReply = [
  ok: number,
  reason: string,
  holder: string,
  token: number,
  ttlMs: number,
  nowUs: number,
  retryAfterMs: number,
  sinceUs: number,
  /** what the script went by for the lineage (lease-common.lua's reply; lineage.ts) */
  ...lineage: string[],
];

/** Where a lease reply's lineage fields start, in the replies of the scripts that read it. */
const LINEAGE_AT = 8;
const LINEAGE_SCRIPTS: ReadonlySet<ScriptName> = new Set(["acquire", "renew", "fence"]);

function decodeView(reply: LeaseReply): LeaseView | null {
  const [, , holder, token, ttlMs, , , sinceUs] = reply;
  return holder === "" ? null : { holder, token, ttlMs, sinceUs };
}

function decodeLease(reply: LeaseReply): LeaseOutcome & StoreTime {
  const [ok, reason, holder, token, ttlMs, atUs, retryAfterMs, sinceUs] = reply;
  // Every granted renew answers this: one literal of fixed shape, no spread of the view
  // (docs/ARCHITECTURE.md, One event loop).
  if (ok === 1 && holder !== "") return { ok: true, holder, token, ttlMs, sinceUs, atUs };
  const current = decodeView(reply);
  const refused = { ok: false as const, reason: reason as RefusalReason, current, atUs };
  return reason === "recovering" ? { ...refused, retryAfterMs } : refused;
}

/** The reason field, only when the script gave one (matches the state machine's shape). */
function withReason<T extends object>(outcome: T, reason: string): T & { reason?: RefusalReason } {
  return reason === "" ? outcome : { ...outcome, reason: reason as RefusalReason };
}

/**
 * A lease write (acquire, renew, release) on a replicated store is answered as done only
 * once a replica has it: a master that fails takes its unreplicated writes with it, and
 * the replica promoted in its place would grant the shard again while the first holder
 * still acts. No replica in time: the write is refused (the caller retries, the keeper
 * stops at its deadline); a lease the store might forget is never reported.
 */
export class ReplicaAckError extends Error {}

export class RedisLeases implements LeaseBackend {
  readonly kind = "redis" as const;
  private readonly redis: RedisClient;
  private readonly virtualClock: RedisBackendOptions["virtualClock"];
  /** the store's lineage as this client's lease scripts last read it (none with a virtual clock) */
  private readonly lineage: LineageReadings | null;
  /** on Sentinel, the client whose lease scripts a failover cuts off and leaseScript sends again */
  private readonly failsOver: Redis | null;

  /** The leases in the key layout `keys` on `connection`, both of which openStore made. */
  constructor(
    private readonly connection: RedisConnection,
    private readonly keys: KeyLayout,
    private readonly options: RedisBackendOptions,
  ) {
    this.redis = connection.client;
    this.virtualClock = options.virtualClock;
    this.lineage = options.virtualClock === undefined ? LineageReadings.of(this.redis) : null;
    this.failsOver = connection.topology.kind === "sentinel" ? (this.redis as Redis) : null;
    defineScripts(
      this.redis,
      options.virtualClock === undefined ? "server" : ("virtual" satisfies ScriptClock),
    );
  }

  /**
   * The leases of the Ironic queue's partitions (one owner each): the same lease rules
   * and scripts as shards' leases, on this connection, in a key space of their own so
   * they never show among the shards.
   */
  partitionOwners(): RedisLeases {
    return new RedisLeases(this.connection, keyLayout(this.keys.ironic.ownersNamespace), {
      ...this.options,
      leaseDirectory: false,
    });
  }

  /** Open a connection of its own to `target` and the leases on it (the tests' way in). */
  static async connect(
    target: string | RedisTopology,
    options: RedisBackendOptions = {},
  ): Promise<RedisLeases> {
    return new RedisLeases(
      await RedisConnection.open(target, options),
      keyLayout(options.namespace),
      options,
    );
  }

  /** A script's arguments, with the virtual clock's readings after them when there is one. */
  private withClock(args: Array<string | number>): Array<string | number> {
    const clock = this.virtualClock;
    if (clock === undefined) return args;
    const lineage = clock.lineage?.();
    return [
      ...args,
      lineage?.promoted === true ? "1" : "0",
      lineage?.id ?? "",
      clock.bootUs(),
      clock.nowUs(),
    ];
  }

  private run(name: ScriptName, key: string | string[], args: Array<string | number>): Promise<unknown> {
    return runScript(this.redis, name, key, this.withClock(args));
  }

  /**
   * Send a lease script with the virtual clock's readings, or with what this client last
   * read of the store's lineage, and keep what its reply says of it for the next script
   * (src/store/redis/lineage.ts); a failed script leaves no reading behind.
   *
   * On Sentinel, a script cut off because a sentinel named a new master while it was in
   * flight (master-switch.ts) is sent once more, to the new master, as soon as the client
   * is connected to it and within the command's timeout from the first send. The first
   * lease script to reach a promoted master starts its lineage hold, whose TTL is what a
   * standby waits after a failover (lease-common.lua): it starts at the failover, not at
   * some caller's next retry.
   *
   * The old master may still run the first copy: it has it, and a frozen one runs it when
   * it thaws, a master still until the sentinels demote it. Safe for every lease script:
   * its reply reaches nobody (the socket it would go to is destroyed); no replica
   * acknowledges its write (they follow the new master), which a write the caller hears
   * of needs (WAIT); and the demotion replaces the old master's data with the new one's.
   * On the new master the copy is a request like any other, judged by the lease rules
   * against what that master holds, with a WAIT of its own where the first had one. An
   * acquire is refused during the hold, or grants the caller the one lease it hears of;
   * a renew that succeeds extends the lease from a later instant than the caller counts
   * from (its send): the caller stops sooner than the store would let it; a release is
   * idempotent; a fence writes at most the hold's start, and a read nothing. Should the
   * socket cut off have been to the new master after all (sentinels announcing an address
   * the socket does not show), the first copy may have run there too, its reply lost:
   * then an acquire is refused behind the caller's own unheard grant, which runs out
   * unused, and a renew extends twice — still one holder.
   */
  private async leaseScript<T>(
    readsLineage: boolean,
    key: string,
    args: Array<string | number>,
    send: (args: Array<string | number>) => Promise<T>,
    replyOf: (sent: T) => LeaseReply,
  ): Promise<T> {
    const lineage = this.lineage;
    if (lineage === null) return send(this.withClock(args));
    const failsOver = this.failsOver;
    const mark = failsOver === null ? 0 : switchMark(failsOver);
    const sentAtMs = performance.now();
    for (let resent = false; ; resent = true) {
      const generation = lineage.current;
      const reading = lineage.argsFor(key);
      let sent: T;
      try {
        sent = await send([...args, ...reading]);
      } catch (error) {
        lineage.forget();
        const cutOff =
          failsOver !== null && !resent && !(error instanceof ReplyError) && abandonedSince(failsOver, mark);
        if (cutOff && (await readyBy(failsOver, sentAtMs + this.connection.commandTimeoutMs))) continue;
        throw error;
      }
      const reply = replyOf(sent);
      if (readsLineage) lineage.learn(key, generation, reading, reply[5], reply.slice(LINEAGE_AT));
      return sent;
    }
  }

  private lease(name: ScriptName, shard: string, args: Array<string | number>): Promise<LeaseReply> {
    const key = this.keys.lease(shard);
    return this.leaseScript(
      LINEAGE_SCRIPTS.has(name),
      key,
      args,
      (sent) => runScript(this.redis, name, key, sent) as Promise<LeaseReply>,
      (reply) => reply,
    );
  }

  /**
   * A lease write: on a replicated store, answered as done only once a replica has it. On
   * a single server the script's own promise, not one more async layer around it (each
   * costs every renew a promise and its microtasks).
   */
  private leaseWrite(name: ScriptName, shard: string, args: Array<string | number>): Promise<LeaseReply> {
    return this.connection.acks === null
      ? this.lease(name, shard, args)
      : this.ackedWrite(name, shard, args, this.connection.acks);
  }

  private async ackedWrite(
    name: ScriptName,
    shard: string,
    args: Array<string | number>,
    { replicas, timeoutMs }: { replicas: number; timeoutMs: number },
  ): Promise<LeaseReply> {
    const key = this.keys.lease(shard);
    let leaseReply: LeaseReply;
    let acked: number;
    if (name === "acquire") {
      // Most acquires are standbys' polls, refused: a refusal writes nothing anyone acts
      // on, so it needs no replica. Its WAIT would still queue behind the renews' WAITs on
      // the bridge's one connection (each waits a replica's round trip): 1,100-1,250 polls
      // a second at 3.6 ms p50 beside 8 renewers, measured. Only a grant is waited for.
      leaseReply = await this.lease(name, shard, args);
      acked = leaseReply[0] === 1 ? await waitForReplicas(this.redis, key, replicas, timeoutMs) : replicas;
    } else {
      // Renews and releases mostly succeed: the WAIT goes out with the script, one round trip.
      const done = await this.leaseScript(
        LINEAGE_SCRIPTS.has(name),
        key,
        args,
        (sent) => runScriptAcked(this.redis, name, key, sent, replicas, timeoutMs),
        (sent) => sent.reply as LeaseReply,
      );
      leaseReply = done.reply as LeaseReply;
      acked = done.acked;
    }
    if (leaseReply[0] === 1 && acked < replicas) {
      if (name === "acquire") await this.takeBack(shard, leaseReply);
      throw new ReplicaAckError(
        `no replica acknowledged the ${name} of shard ${shard} within ${timeoutMs} ms: not done ` +
          "(a failover now could forget it); retry",
      );
    }
    return leaseReply;
  }

  /**
   * Hand back a grant that no replica acknowledged: its holder hears a refusal and never
   * acts on it, and left in place it would hold the shard for a TTL against everyone,
   * its own holder included (a lease it never renewed), after the replicas are back. No
   * WAIT: if the master dies before the release reaches a replica, the replica has the
   * grant (nobody acts on it; it runs out) or not even that. Best effort: on an error the
   * grant runs out by itself.
   */
  private async takeBack(shard: string, grant: LeaseReply): Promise<void> {
    const [, , holder, token] = grant;
    await this.lease("release", shard, [holder, token]).catch(() => undefined);
  }

  async acquire({ shard, agent, ttlMs, keyDigest = "" }: AcquireInput) {
    const outcome = decodeLease(await this.leaseWrite("acquire", shard, [agent, ttlMs, keyDigest]));
    // Into the directory before the grant is answered: a bridge that dies in between
    // leaves a lease whose holder never learned its token, so nothing relies on it yet.
    if (outcome.ok && this.options.leaseDirectory !== false) await this.record(shard, agent);
    return outcome;
  }

  /** Note a grant in the lease directory (its own slot: a separate step from the lease script). */
  private async record(shard: string, agent: string): Promise<void> {
    const { shards, grantedTo } = this.keys.leases;
    await this.redis.pipeline().zadd(shards, 0, shard).zadd(grantedTo(agent), 0, shard).exec();
  }

  async renew({ shard, agent, token, ttlMs }: RenewInput) {
    return decodeLease(await this.leaseWrite("renew", shard, [agent, token, ttlMs]));
  }

  async release({ shard, agent, token }: ReleaseInput): Promise<ReleaseOutcome & StoreTime> {
    const reply = await this.leaseWrite("release", shard, [agent, token]);
    return withReason({ ok: reply[0] === 1, current: decodeView(reply), atUs: reply[5] }, reply[1]);
  }

  async fence({ shard, token, keyDigest }: FenceInput): Promise<FenceOutcome & StoreTime> {
    // Always two arguments: the clock's and the lineage's readings follow them.
    const reply = await this.lease("fence", shard, [token, keyDigest ?? ""]);
    return withReason({ allowed: reply[0] === 1, current: decodeView(reply), atUs: reply[5] }, reply[1]);
  }

  async read(shard: string): Promise<ReadOutcome & StoreTime> {
    // read.lua adds the highest token minted where the others say what they read of the lineage.
    const reply = await this.lease("read", shard, []);
    return { current: decodeView(reply), lastToken: Number(reply[8]), atUs: reply[5] };
  }

  async heartbeat(
    agent: string,
    serves: string[],
    instance: string,
    windowMs: number,
  ): Promise<AgentLiveness | { hostTwin: string }> {
    const { seen, serves: servesKey, hosts, instances } = this.keys.agents;
    // Shard names cannot hold a comma (see ShardName): the list is stored comma-joined.
    const [lastSeenMs, recorded] = (await this.run(
      "heartbeat",
      [seen, servesKey, hosts, instances(agent)],
      [agent, serves.join(","), hostKey(agent), instance, String(windowMs)],
    )) as [number, string];
    if (lastSeenMs < 0) return { hostTwin: recorded };
    return { agent, lastSeenMs, ageMs: 0, serves: recorded === "" ? [] : recorded.split(",") };
  }

  async agents(): Promise<AgentLiveness[]> {
    const { seen: seenKey, serves: servesKey } = this.keys.agents;
    const [nowMs, ...triples] = (await this.run("agents", [seenKey, servesKey], [])) as [
      number,
      ...Array<string | number>,
    ];
    const seen: AgentLiveness[] = [];
    for (let i = 0; i < triples.length; i += 3) {
      const lastSeenMs = triples[i + 1] as number;
      const serves = String(triples[i + 2]);
      seen.push({
        agent: triples[i] as string,
        lastSeenMs,
        ageMs: nowMs - lastSeenMs,
        serves: serves === "" ? [] : serves.split(","),
      });
    }
    return sortAgents(seen);
  }

  async forgetAgent(agent: string): Promise<boolean> {
    const { seen, serves, instances } = this.keys.agents;
    // The keys share the {agents} tag (one slot on Cluster): one MULTI drops the record whole.
    const replies = await this.redis
      .multi()
      .zrem(seen, agent)
      .hdel(serves, agent)
      .del(instances(agent))
      .exec();
    return replies?.[0]?.[1] === 1;
  }

  async agent(agent: string): Promise<AgentLiveness | null> {
    const { seen: seenKey, serves: servesKey } = this.keys.agents;
    // Three commands sent together, not an ioredis pipeline (see docs/ARCHITECTURE.md, One
    // event loop: a pipeline object costs the loop far more than the commands it holds).
    const [score, serves, time] = await Promise.all([
      this.redis.zscore(seenKey, agent),
      this.redis.hget(servesKey, agent),
      this.redis.time(),
    ]);
    if (score === null) return null;
    const lastSeenMs = Number(score);
    const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    return { agent, lastSeenMs, ageMs: nowMs - lastSeenMs, serves: serves ? serves.split(",") : [] };
  }

  async leasedShards(): Promise<string[]> {
    return this.redis.zrange(this.keys.leases.shards, 0, -1);
  }

  async grantedTo(agent: string): Promise<string[]> {
    return this.redis.zrange(this.keys.leases.grantedTo(agent), 0, -1);
  }

  async isListed(shard: string): Promise<boolean> {
    return (await this.redis.zscore(this.keys.leases.shards, shard)) !== null;
  }

  async unlist(shard: string): Promise<boolean> {
    return (await this.redis.zrem(this.keys.leases.shards, shard)) === 1;
  }

  async relist(shard: string): Promise<void> {
    await this.redis.zadd(this.keys.leases.shards, 0, shard);
  }

  /**
   * Fill the lease directory from the lease keys themselves, once, for a store written by
   * a bridge that kept no directory: the one SCAN of the keyspace, at connect. Answers how
   * many shards it found.
   */
  async buildDirectory(): Promise<number> {
    if ((await this.redis.exists(this.keys.leases.shards)) === 1) return 0;
    let found = 0;
    for await (const keys of scanKeys(this.redis, this.keys.leasePattern))
      for (const key of keys) {
        const shard = this.keys.shardOfLeaseKey(key);
        const holder = await this.redis.hget(key, "holder");
        if (holder !== null) await this.record(shard, holder);
        else await this.redis.zadd(this.keys.leases.shards, 0, shard);
        found++;
      }
    return found;
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.connection.close();
  }
}
