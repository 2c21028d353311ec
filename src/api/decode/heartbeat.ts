import { HeartbeatBody } from "../../contracts/agents.js";
import { parseOrThrow } from "../../core/validation.js";
import { decodeObject, type Decoded } from "./result.js";

/** What a heartbeat says: the shards its agent serves, and which of its processes says so. */
export interface HeartbeatRequestBody {
  shards: string[];
  instance: string | undefined;
}

/**
 * A heartbeat's body. It may be half a megabyte (1,000 names of 255 characters), and text of that size that is no such list — 260,000 numbers,
 * or brackets nested 260,000 deep — holds a JSON parser for 5–40 ms: it is decoded in the
 * worker (see pool.ts), and refused there, whole, before the event loop sees any of it.
 */
export function decodeHeartbeat(text: string): Decoded<HeartbeatRequestBody> {
  return decodeObject(text, (body) => {
    const { shards, instance } = parseOrThrow(HeartbeatBody, body);
    return { shards, instance };
  });
}
