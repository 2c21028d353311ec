import type { Operation } from "../openapi/operation.js";

/**
 * How each route's body is read: at most `limit` bytes (refused with 413 before it is
 * read), and whether it is JSON the event loop parses itself. A JSON.parse of a megabyte
 * holds the loop for 10–50 ms, and every renew of every shard waits behind it, so the
 * routes that take large bodies decode them in a worker thread (see decode/) and every
 * other route takes no more than a small body can need.
 */
export interface BodyPolicy {
  limit: number;
  /** true: parsed here into req.body; false: the route decodes req.bodyChunks itself */
  parseHere: boolean;
}

const KiB = 1024;
const MiB = 1024 * KiB;

/** 20,000 nodes; decoded off the event loop. */
export const BULK_BODY: BodyPolicy = { limit: 8 * MiB, parseHere: false };
/** An inspection result with its inventory; decoded off the event loop (the signature covers the raw bytes). */
export const WEBHOOK_BODY: BodyPolicy = { limit: 1 * MiB, parseHere: false };
/** A heartbeat may name 1,000 shards of 255 characters; decoded off the event loop (see decode/heartbeat.ts). */
export const HEARTBEAT_BODY: BodyPolicy = { limit: 512 * KiB, parseHere: false };
/**
 * A request forwarded through the fenced Ironic endpoint, never parsed here: Ironic's own
 * limit (oslo.middleware's max_request_body_size, 112 KiB by default) is far below it,
 * and an operator who raises Ironic's for config drives gets up to this much through.
 */
export const FENCED_BODY: BodyPolicy = { limit: 8 * MiB, parseHere: false };
/** Every other body: a lease call, a node, a patch, an ack. */
export const SMALL_BODY: BodyPolicy = { limit: 64 * KiB, parseHere: true };

/** The status page's login form: a token and little else; read by its route, not parsed as JSON. */
export const LOGIN_FORM_BODY: BodyPolicy = { limit: 4 * KiB, parseHere: false };

/** How `operation`'s body is read: as it declares (operation.ts), or as a small JSON body. */
export function bodyPolicyOf(operation: Operation): BodyPolicy {
  return operation.bodyPolicy ?? SMALL_BODY;
}
