import { logger } from "../runtime/log.js";
import { BridgeClient, isPermanentRefusal } from "./bridge-client.js";
import { bridgeKeeper } from "../core/keeper/lease-keeper.js";
import { logTransition } from "../core/keeper/transition-log.js";
import { UNDEFINED_MAX_WAIT_MS, UndefinedShard } from "./undefined-shard.js";

export interface ReferenceAgentOptions {
  id: string;
  shard: string;
  bridge: string;
  token: string;
  /** like nova-compute's report_interval */
  heartbeatMs?: number;
  /** how often an active agent re-reads its node list */
  nodesEveryMs?: number;
  /** how often an active agent reads its shard's trait feed */
  feedEveryMs?: number;
  /** while another holds the lease, ask at most this often (the keeper's default: 500 ms) */
  standbyPollMs?: number;
}

/**
 * The reference compute agent: what nova-compute's ironic driver does with shardbridge.
 * It stands by or becomes active for one shard, renews, reads the nodes it must manage
 * while active (with the token its writes carry), heartbeats, hands the lease back on
 * SIGTERM so the standby takes over at once, and logs every transition as one JSON line.
 */
export function runReferenceAgent(options: ReferenceAgentOptions): { stop: () => Promise<void> } {
  const { id, shard } = options;
  const client = new BridgeClient(options.bridge, options.token);
  const undefinedShard = new UndefinedShard();
  const keeper = bridgeKeeper(client, shard, id, options.standbyPollMs, (cause) =>
    undefinedShard.retryAfterMs(cause),
  );
  const log = logger.child({ agent: id, shard });
  const answered = () => {
    if (undefinedShard.answered()) log.info("shard-defined-again");
  };

  const listNodes = async () => {
    const token = keeper.token();
    if (token === null) return;
    try {
      const mine = await client.nodesOf(id, [token]);
      const here = mine.nodes.filter((n) => n.shard === shard);
      log.info("nodes", {
        count: here.length,
        token: mine.leases.find((l) => l.shard === shard)?.token ?? null,
      });
    } catch (error) {
      log.warn("nodes-error", { error: String(error) });
    }
  };

  // While active: read the shard's trait feed, "apply" each change (this reference agent
  // logs what nova-compute would write to placement), then acknowledge under the token,
  // so a successor resumes right after it.
  let feedBusy = false;
  const consumeFeed = async () => {
    const token = keeper.token();
    if (token === null || feedBusy) return;
    feedBusy = true;
    try {
      const { entries, resync } = await client.readFeed(shard, token);
      if (resync !== undefined) {
        // Away longer than the feed keeps: take the shard's whole picture, then go on
        // after the entry it was taken at.
        log.warn("traits-resync", { reason: resync.reason, nodes: resync.nodes.length });
        for (const { node, traits, generation } of resync.nodes)
          log.info("traits", { node, traits, generation });
        if (resync.resume_after !== null && keeper.token() === token)
          await client.ackFeed(shard, token, resync.resume_after);
        return;
      }
      for (const entry of entries)
        log.info("traits", {
          node: entry.node,
          deltas: entry.deltas,
          generation: entry.generation,
          feed_id: entry.id,
        });
      const last = entries[entries.length - 1];
      if (last !== undefined && keeper.token() === token) await client.ackFeed(shard, token, last.id);
    } catch (error) {
      log.warn("feed-error", { error: String(error) });
    } finally {
      feedBusy = false;
    }
  };

  keeper.on("active", (e) => {
    answered();
    logTransition(log, { message: "active", token: e.token, ttl_ms: e.ttlMs });
    void listNodes();
  });
  keeper.on("standby", (e) => {
    answered();
    log.info("standby", {
      holder: e.current?.holder ?? null,
      reason: e.reason,
      ttl_ms: e.current?.ttlMs ?? null,
      // a store holding the shard after a restart or failover says when to ask again
      ...(e.retryAfterMs !== undefined && { retry_after_ms: e.retryAfterMs }),
    });
  });
  keeper.on("lost", (e) =>
    logTransition(log, { message: "lost", token: e.token, reason: e.reason, detail: e.detail }),
  );
  keeper.on("released", (e) => logTransition(log, { message: "released", token: e.token }));
  keeper.on("store-error", (e) => {
    // A wrong token, a shard this agent may not serve or one the bridge never leased
    // will not fix itself by retrying: say it once, plainly, and stop (exit 2).
    const undefinedNow = undefinedShard.verdict(e.cause);
    if (isPermanentRefusal(e.cause) || undefinedNow === "fatal") {
      log.error("fatal", { op: e.op, error: e.error });
      void keeper.stop().then(() => process.exit(2));
      return;
    }
    // A shard it served that the bridge no longer knows: the store lost its definition.
    // Said once; the agent stands by and asks again, less and less often.
    if (undefinedNow === "first")
      log.error("shard-undefined", { error: e.error, retry_max_ms: UNDEFINED_MAX_WAIT_MS });
    if (undefinedNow === null) log.warn("bridge-error", { op: e.op, error: e.error });
  });

  const beat = () =>
    client.heartbeat(id, [shard]).catch((error) => log.warn("heartbeat-error", { error: String(error) }));
  const heartbeats = setInterval(beat, options.heartbeatMs ?? 10_000);
  const nodeReads = setInterval(() => void listNodes(), options.nodesEveryMs ?? 30_000);
  const feedReads = setInterval(() => void consumeFeed(), options.feedEveryMs ?? 1000);
  void beat();
  log.info("start", { bridge: options.bridge, pid: process.pid });
  keeper.start();

  return {
    stop: async () => {
      clearInterval(heartbeats);
      clearInterval(nodeReads);
      clearInterval(feedReads);
      await keeper.stop();
      log.info("stopped");
    },
  };
}
