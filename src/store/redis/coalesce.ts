import type { Socket } from "node:net";
import { Cluster, type Redis } from "ioredis";

/**
 * Every command ioredis sends is one `write` on the connection's socket, and on loopback
 * or a LAN a write is a system call that costs several times what encoding the command
 * does (and on this VM wakes Redis on the other core). Renews arrive from many agents at
 * once: the requests one turn of the event loop reads all call the store before the loop
 * turns again. Corking the socket and uncorking it when the turn's I/O callbacks are done
 * (setImmediate runs right after them) sends those commands in one writev, and Redis
 * answers them in one read.
 *
 * Commands written while the replies of one read are handed out (the callers they
 * resume, and what those write, run before the loop goes on) are flushed as soon as
 * that is done (process.nextTick: it runs once the promise continuations queued now
 * have run), not at the turn's end: a closed loop of callers, or a single one, sends
 * its next commands without waiting for the rest of the turn, in one write all the
 * same (8 callers: one write for the 8). Commands written from anything else (HTTP
 * requests) wait for the turn's end, so the requests of one turn share one write.
 *
 * ioredis's own enableAutoPipelining batches per process.nextTick, which runs after each
 * request's own callbacks: it never joins two requests' commands, and its Pipeline costs
 * more per command than the write it saves (measured in #11: slower).
 */
export function coalesceWrites(client: Redis | Cluster): void {
  if (client instanceof Cluster) {
    // One connection per cluster node, made as the slot map names them.
    client.on("+node", (node: Redis) => corkPerTurn(node));
    for (const node of client.nodes()) corkPerTurn(node);
  } else {
    corkPerTurn(client);
  }
}

const hooked = new WeakSet<Socket>();

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
    // Set from this socket's read until the continuations its replies resume have run:
    // the microtask queued before ioredis resolves them schedules the reset, and a
    // nextTick scheduled from a microtask runs once the microtask queue is empty.
    let replying = false;
    const replied = () => {
      replying = false;
    };
    socket.prependListener("data", () => {
      if (replying) return;
      replying = true;
      queueMicrotask(() => process.nextTick(replied));
    });
    socket.write = function (this: Socket, ...args: Parameters<Socket["write"]>) {
      if (!corked) {
        corked = true;
        socket.cork();
        if (replying) process.nextTick(uncork);
        else setImmediate(uncork);
      }
      return write.apply(this, args);
    } as Socket["write"];
  };
  redis.on("connect", hook);
  hook();
}
