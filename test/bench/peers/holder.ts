/**
 * A holder in its own process for `make bench peers`, so that kill -9 takes its renews
 * with it as a crashed host's would: `--peer etcd` or `--peer redis-lock`, the same
 * recipe as the bench's own agents (EtcdMember, LockMember). One JSON line per event
 * (AgentProcess reads them): "active" once it holds; on SIGTERM it hands the lease back
 * (etcd: revokes its lease; the lock: deletes its key) and says "released".
 */
import { parseArgs } from "node:util";
import { Etcd3 } from "etcd3";
import { Redis } from "ioredis";
import { EtcdMember } from "./etcd.js";
import { LockMember, loadScripts } from "./redis-lock.js";

const { values } = parseArgs({
  options: {
    peer: { type: "string" },
    url: { type: "string" },
    shard: { type: "string" },
    agent: { type: "string" },
  },
});
const shard = values.shard!;
const agent = values.agent!;
const url = values.url!;

const log = (ev: string) => process.stdout.write(`${JSON.stringify({ ev, agent, t: Date.now() })}\n`);
const events = { holds: () => log("active"), standsBy: () => log("standby"), lost: () => log("lost") };

async function hold(): Promise<{ stop: () => Promise<void> }> {
  if (values.peer === "etcd") {
    const client = new Etcd3({ hosts: url });
    const member = new EtcdMember(client, shard, agent, events);
    await member.start();
    return {
      stop: async () => {
        await member.stop(true);
        client.close();
      },
    };
  }
  if (values.peer !== "redis-lock") throw new Error(`--peer etcd or redis-lock, not ${values.peer}`);
  const redis = new Redis(url);
  const member = new LockMember(redis, await loadScripts(redis), shard, agent, events);
  member.start();
  return {
    stop: async () => {
      await member.stop(true);
      redis.disconnect();
    },
  };
}

const held = await hold();
process.once("SIGTERM", () => {
  void held.stop().then(() => {
    log("released");
    process.exit(0);
  });
});
