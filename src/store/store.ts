import { z } from "zod";
import {
  AcquireRequest,
  FenceRequest,
  ReleaseRequest,
  RenewRequest,
  type AcquireRequest as AcquireArgs,
  type FenceRequest as FenceArgs,
  type ReleaseRequest as ReleaseArgs,
  type RenewRequest as RenewArgs,
} from "../domain/lease.js";
import { AgentId, ShardName } from "../domain/names.js";
import { parseOrThrow } from "../domain/validation.js";
import { NodeRegistry } from "../nodes/registry.js";
import type { NodeBackend } from "../nodes/port.js";
import type { LeaseBackend } from "./port.js";

const ReadRequest = z.strictObject({ shard: ShardName });
const HeartbeatRequest = z.strictObject({ agent: AgentId });

/**
 * The Store port every caller uses. It validates each request (throwing a
 * ValidationError naming the field, before any I/O, so nothing is written) and hands
 * the parsed input to a backend. Validation lives here once, not in each backend.
 */
export class Store {
  /** the node registry, on the same store as the leases */
  readonly nodes: NodeRegistry;

  constructor(
    readonly backend: LeaseBackend,
    nodes: NodeBackend,
  ) {
    this.nodes = new NodeRegistry(nodes);
  }

  get kind(): LeaseBackend["kind"] {
    return this.backend.kind;
  }

  async acquire(args: AcquireArgs) {
    return this.backend.acquire(parseOrThrow(AcquireRequest, args));
  }

  async renew(args: RenewArgs) {
    return this.backend.renew(parseOrThrow(RenewRequest, args));
  }

  async release(args: ReleaseArgs) {
    return this.backend.release(parseOrThrow(ReleaseRequest, args));
  }

  async fence(args: FenceArgs) {
    return this.backend.fence(parseOrThrow(FenceRequest, args));
  }

  async read(shard: string) {
    return this.backend.read(parseOrThrow(ReadRequest, { shard }).shard);
  }

  async heartbeat(agent: string) {
    return this.backend.heartbeat(parseOrThrow(HeartbeatRequest, { agent }).agent);
  }

  async agents() {
    return this.backend.agents();
  }

  async ping() {
    return this.backend.ping();
  }

  async close() {
    return this.backend.close();
  }
}
