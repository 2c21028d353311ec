import type { Socket } from "node:net";
import { Cluster, type Redis } from "ioredis";
import type { RedisClient } from "./connect.js";

/**
 * Every command ioredis sends is one `write` on the connection's socket, and on loopback
 * or a LAN a write is a system call that costs several times what encoding the command
 * does (and on this VM wakes Redis on the other core). Renews arrive from many agents at
 * once: the requests one turn of the event loop reads all call the store before the loop
 * turns again. Corking the socket and uncorking it when the turn's I/O callbacks are done
 * (setImmediate runs right after them) sends those commands in one writev, and Redis
 * answers them in one read.
 *
 * How long the cork stays depends on the connection. With commands unanswered Redis is
 * busy with those and reads whatever came meanwhile in one go when done: the cork waits
 * for the turn's end, gathering every request's commands. On an idle connection nothing
 * is gained by waiting for other requests: the cork is lifted as soon as the code that
 * wrote runs out of work (process.nextTick: after the promise continuations queued now),
 * so a lone command, or a single caller's closed loop, never waits for the rest of the
 * turn, while the commands written together still leave in one write: a script and its
 * WAIT (runScriptAcked), or the renews one reply read resumes (8 callers: one write).
 *
 * ioredis's own enableAutoPipelining batches per process.nextTick, which runs after each
 * request's own callbacks: it never joins two requests' commands, and its Pipeline costs
 * more per command than the write it saves (measured in #11: slower).
 */
export function coalesceWrites(client: RedisClient): void {
  if (client instanceof Cluster) {
    // One connection per cluster node, made as the slot map names them.
    client.on("+node", (node: Redis) => corkPerTurn(node));
    for (const node of client.nodes()) corkPerTurn(node);
  } else {
    corkPerTurn(client);
  }
}

const hooked = new WeakSet<Socket>();

/**
 * Commands written on `redis` and not answered yet: ioredis keeps them in its command
 * queue (pushed just after each write, shifted as each reply is read). Not a public field:
 * should a release drop it, every command is taken as having company, which corks as
 * before this rule.
 */
function unanswered(redis: Redis): number {
  return (redis as unknown as { commandQueue?: { length: number } }).commandQueue?.length ?? 1;
}

/** Cork each socket `redis` connects with (a reconnect makes a new one): see coalesceWrites for how long. */
function corkPerTurn(redis: Redis): void {
  const hook = () => {
    const socket = (redis as unknown as { stream?: Socket }).stream;
    if (socket === undefined || hooked.has(socket)) return;
    hooked.add(socket);
    const write = socket.write;
    let corked = false;
    const uncork = () => {
      corked = false;
      socket.uncork();
    };
    socket.write = function (this: Socket, ...args: Parameters<Socket["write"]>) {
      if (!corked) {
        corked = true;
        socket.cork();
        if (unanswered(redis) > 0) setImmediate(uncork);
        else process.nextTick(uncork);
      }
      return write.apply(this, args);
    } as Socket["write"];
  };
  redis.on("connect", hook);
  hook();
}
