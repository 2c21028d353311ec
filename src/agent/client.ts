import type { BareMetalNode } from "../domain/node.js";
import type {
  FenceOutcome,
  LeaseOutcome,
  LeaseView,
  RefusalReason,
  ReleaseOutcome,
} from "../lease/machine.js";
import type { FeedEntry } from "../traits/port.js";
import type { AcquireArgs, LeaseClient, WaitedLeaseOutcome } from "./lease-keeper.js";

/** A bridge answer that is neither a result nor a lease refusal: auth, validation, outage. */
export class BridgeError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
  ) {
    super(`${status} ${code}: ${detail}`);
    this.name = "BridgeError";
  }
}

/**
 * A refusal that retrying will not change: the bridge does not know this agent's token
 * (401), the token may not act here (403), or the shard is not one it leases (404
 * shardbridge.shard.undefined: a typo'd name, see serve --allow-undefined-shards).
 */
export function isPermanentRefusal(error: unknown): error is BridgeError {
  return (
    error instanceof BridgeError &&
    (error.status === 401 || error.status === 403 || error.code === "shardbridge.shard.undefined")
  );
}

export interface WireLease {
  holder: string;
  /** null where the bridge does not show it: another agent's lease, to an agent */
  token: number | null;
  ttl_ms: number;
  since: string;
}
interface WireError {
  status: number;
  code: string;
  detail: string;
  field?: string;
  lease?: WireLease | null;
  retry_after_ms?: number;
  waited_ms?: number;
}

/** A lease an agent holds: which shard, as whom, under which token. */
export interface HeldLease {
  shard: string;
  agent: string;
  token: number;
}

export interface AgentNodes {
  agent: string;
  leases: Array<WireLease & { shard: string }>;
  legacy: { pool_member: boolean; ring: string; members: string[]; built_at: string | null };
  /** `via`: "lease" (a shard it holds; `token` is the fencing token), "instance" or "ring" (unsharded, no token) */
  nodes: Array<BareMetalNode & { token: number | null; via: "lease" | "instance" | "ring" }>;
}

/** A lease as an answer shows it; 0 for a token the bridge did not show this caller. */
const view = (lease: WireLease): LeaseView => ({
  holder: lease.holder,
  token: lease.token ?? 0,
  ttlMs: lease.ttl_ms,
  sinceUs: Date.parse(lease.since) * 1000,
});

/** A shard as GET /v1/shards/{shard} shows it. */
export interface ShardInfo {
  name: string;
  defined: boolean;
  description: string;
  lease_ttl_ms: number;
  /** who may serve it; null: any agent */
  agents: string[] | null;
  count: number;
  lease: WireLease | null;
  /** the fenced Ironic endpoint's path with "{token}" for the token, or null */
  ironic_endpoint: string | null;
}

/**
 * The typed client an agent uses to talk to the bridge over HTTP (keep-alive, bearer
 * token, a timeout per request). It is a LeaseClient, so a LeaseKeeper runs on it as it
 * runs on a Store.
 */
/** GET /v1/shards/{shard}/feed: entries after the cursor, or a resync when some were trimmed. */
export interface FeedAnswer {
  cursor: string | null;
  entries: FeedEntry[];
  resync?: {
    reason: string;
    resume_after: string | null;
    nodes: Array<{ node: string; traits: string[]; generation: number }>;
  };
}

/** How trait changes stand on their way to Ironic (GET /v1/ironic/delivery). */
export type IronicDelivery =
  | { configured: false }
  | {
      configured: true;
      durable: boolean;
      pending_changes: number;
      oldest_pending_ms: number;
      batches: { delivered: number; retried: number; given_up: number };
      /** the rest of the answer (docs/API.md): the queue, this bridge's part, what was given up */
      coalesced_changes?: number;
      queue?: { partitions: number; partition_bound: number; queued_batches: number; folded_nodes: number };
      live_bridges?: number;
      this_bridge?: { worker: string; partitions: number[]; calls_in_flight: number };
      undeliverable?: Array<{ node: string; changes: string[]; reason: string; at: string }>;
    };

/** One row of GET /v1/shards. */
export interface ShardSummary {
  name: string;
  count: number;
  description: string | null;
  lease: WireLease | null;
  /** how long the oldest change its holder has not acknowledged has waited (0: none; null: the unsharded pool) */
  feed_lag_ms: number | null;
}

/** One definition of GET /v1/shard-definitions. */
export interface StoredDefinition {
  name: string;
  description: string;
  lease_ttl_ms: number;
  agents: string[] | null;
  filling: boolean;
  source: "file" | "store" | null;
}

/** One row of GET /v1/agents. */
export interface AgentSummary {
  id: string;
  last_seen: string | null;
  age_ms: number | null;
  up: boolean;
  shards: string[];
  serves: string[];
  legacy_pool: boolean;
}

export class BridgeClient implements LeaseClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    private readonly timeoutMs = 2000,
  ) {}

  /** false once the bridge refused `wait_ms` (a bridge older than waiting acquires): then it is polled */
  private bridgeWaits = true;

  private async request(
    method: string,
    path: string,
    body?: unknown,
    /** more time than the timeout: a waiting acquire's wait */
    extraMs = 0,
  ): Promise<{ status: number; json: any }> {
    const res = await fetch(new URL(path, this.baseUrl), {
      method,
      headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(this.timeoutMs + extraMs),
    });
    const text = await res.text();
    return { status: res.status, json: text === "" ? null : JSON.parse(text) };
  }

  /** Throw the first error of an API-SIG answer. */
  private fail(answer: { status: number; json: any }): never {
    const error = (answer.json?.errors?.[0] ?? {}) as Partial<WireError>;
    throw new BridgeError(answer.status, error.code ?? "unknown", error.detail ?? "");
  }

  /** The lease refusal (409) in an answer; any other failure is thrown. */
  private refusalOf(answer: { status: number; json: any }): WireError {
    if (answer.status !== 409) this.fail(answer);
    return answer.json.errors[0] as WireError;
  }

  private leaseOutcome(answer: { status: number; json: any }): WaitedLeaseOutcome {
    if (answer.status === 200) {
      const grant = answer.json as WireLease & { waited_ms?: number };
      const outcome = { ok: true as const, ...view(grant) };
      return grant.waited_ms === undefined ? outcome : { ...outcome, waitedMs: grant.waited_ms };
    }
    const error = this.refusalOf(answer);
    const reason = error.code.replace(/^shardbridge\.lease\./, "") as RefusalReason;
    return {
      ok: false,
      reason,
      current: error.lease ? view(error.lease) : null,
      ...(reason === "recovering" && { retryAfterMs: error.retry_after_ms ?? 0 }),
      ...(error.waited_ms !== undefined && { waitedMs: error.waited_ms }),
    };
  }

  /** GET /v1/shards/{shard}: its TTL and who may serve it; null for a shard the bridge does not know. */
  async shard(name: string): Promise<ShardInfo | null> {
    const answer = await this.request("GET", `/v1/shards/${encodeURIComponent(name)}`);
    if (answer.status === 404) return null;
    if (answer.status !== 200) this.fail(answer);
    return answer.json as ShardInfo;
  }

  /** GET /v1/shards: every shard with its node count and live lease (tokens for admin only). */
  async shards(): Promise<ShardSummary[]> {
    const answer = await this.request("GET", "/v1/shards");
    if (answer.status !== 200) this.fail(answer);
    return (answer.json as { shards: ShardSummary[] }).shards;
  }

  /** GET /v1/ironic/delivery: trait changes on their way to Ironic. */
  async ironicDelivery(): Promise<IronicDelivery> {
    const answer = await this.request("GET", "/v1/ironic/delivery");
    if (answer.status !== 200) this.fail(answer);
    return answer.json as IronicDelivery;
  }

  /** GET /v1/agents: every agent the bridge heard from, and what it holds. */
  async agents(): Promise<{ agents: AgentSummary[]; downAfterMs: number }> {
    const answer = await this.request("GET", "/v1/agents");
    if (answer.status !== 200) this.fail(answer);
    const json = answer.json as { agents: AgentSummary[]; down_after_ms: number };
    return { agents: json.agents, downAfterMs: json.down_after_ms };
  }

  /**
   * Acquire; with `waitMs`, wait that long at the bridge for the lease while another holds
   * it (its answer then says how long it waited). A bridge that does not know `wait_ms`
   * refuses the field: it is asked without, now and from then on.
   */
  async acquire({ shard, agent, waitMs = 0 }: AcquireArgs): Promise<WaitedLeaseOutcome> {
    const path = `/v1/shards/${shard}/lease`;
    if (waitMs > 0 && this.bridgeWaits) {
      const answer = await this.request("POST", path, { agent, wait_ms: waitMs }, waitMs);
      const refused =
        answer.status === 400 && answer.json?.errors?.some((e: WireError) => e.field === "wait_ms");
      if (!refused) return this.leaseOutcome(answer);
      this.bridgeWaits = false;
    }
    return this.leaseOutcome(await this.request("POST", path, { agent }));
  }

  async renew(lease: HeldLease): Promise<LeaseOutcome> {
    const { shard, agent, token } = lease;
    return this.leaseOutcome(await this.request("POST", `/v1/shards/${shard}/lease`, { agent, token }));
  }

  async release(lease: HeldLease): Promise<ReleaseOutcome> {
    const { shard, agent, token } = lease;
    const answer = await this.request("DELETE", `/v1/shards/${shard}/lease`, { agent, token });
    if (answer.status === 204) return { ok: true, current: null };
    const error = this.refusalOf(answer);
    return {
      ok: false,
      reason: error.code.replace(/^shardbridge\.lease\./, "") as RefusalReason,
      current: error.lease ? view(error.lease) : null,
    };
  }

  async fence({ shard, token }: { shard: string; token: number }): Promise<Pick<FenceOutcome, "allowed">> {
    const answer = await this.request("POST", `/v1/shards/${shard}/fence`, { token });
    if (answer.status !== 200) this.fail(answer);
    return { allowed: answer.json.allowed === true };
  }

  /** The shard's trait feed after its acknowledged cursor (only the holder, with its token). */
  async readFeed(shard: string, token: number): Promise<FeedAnswer> {
    const answer = await this.request("GET", `/v1/shards/${shard}/feed?token=${token}`);
    if (answer.status !== 200) this.fail(answer);
    return answer.json as FeedAnswer;
  }

  /** Acknowledge feed entries up to `id` under the holder's token. */
  async ackFeed(shard: string, token: number, id: string): Promise<string> {
    const answer = await this.request("POST", `/v1/shards/${shard}/feed/ack`, { token, id });
    if (answer.status !== 200) this.fail(answer);
    return (answer.json as { cursor: string }).cursor;
  }

  /** Admin: upsert whole nodes in one request (at most 20,000). */
  async bulkUpsert(nodes: BareMetalNode[]): Promise<{ created: number; updated: number }> {
    const answer = await this.request("POST", "/v1/nodes/bulk", { nodes });
    if (answer.status !== 200) this.fail(answer);
    return answer.json as { created: number; updated: number };
  }

  /** Admin: change some fields of one node (JSON merge patch); the node as it is now. */
  async patchNode(uuid: string, patch: Partial<Omit<BareMetalNode, "uuid">>): Promise<BareMetalNode> {
    const answer = await this.request("PATCH", `/v1/nodes/${uuid}`, patch);
    if (answer.status !== 200) this.fail(answer);
    return answer.json as BareMetalNode;
  }

  /** Every shard definition (files' and the store's) and the store's version of them. */
  async shardDefinitions(): Promise<{ version: number; refreshMs: number; definitions: StoredDefinition[] }> {
    const answer = await this.request("GET", "/v1/shard-definitions");
    if (answer.status !== 200) this.fail(answer);
    const json = answer.json as { version: number; refresh_ms: number; definitions: StoredDefinition[] };
    return { version: json.version, refreshMs: json.refresh_ms, definitions: json.definitions };
  }

  /** Admin: define a shard in the store; answers it and how soon every bridge uses it. */
  async defineShard(
    name: string,
    body: { description?: string; lease_ttl_ms?: number; agents?: string[]; filling?: boolean },
  ): Promise<StoredDefinition & { takes_effect_within_ms: number }> {
    const answer = await this.request("PUT", `/v1/shard-definitions/${encodeURIComponent(name)}`, body);
    if (answer.status !== 200 && answer.status !== 201) this.fail(answer);
    return answer.json as StoredDefinition & { takes_effect_within_ms: number };
  }

  /** Every node the bridge holds, page by page (admin). */
  async allNodes(pageSize = 10_000): Promise<BareMetalNode[]> {
    const all: BareMetalNode[] = [];
    let marker: string | null = null;
    do {
      const query: string = `/v1/nodes?limit=${pageSize}${marker === null ? "" : `&marker=${marker}`}`;
      const answer = await this.request("GET", query);
      if (answer.status !== 200) this.fail(answer);
      const page = answer.json as { nodes: BareMetalNode[]; next: string | null };
      all.push(...page.nodes);
      marker =
        page.next === null ? null : (new URL(page.next, this.baseUrl).searchParams.get("marker") ?? null);
    } while (marker !== null);
    return all;
  }

  /** `shards`: what the agent serves; none puts it in the legacy ring pool (nova without `[ironic] shard`). */
  async heartbeat(agent: string, shards: string[] = []): Promise<void> {
    const answer = await this.request("POST", `/v1/agents/${encodeURIComponent(agent)}/heartbeat`, {
      shards,
    });
    if (answer.status !== 200) this.fail(answer);
  }

  /** The nodes of the shards `agent` holds under `tokens` (all its shards, for admin). */
  async nodesOf(agent: string, tokens?: number[]): Promise<AgentNodes> {
    const query = tokens === undefined ? "" : `?token=${tokens.join(",")}`;
    const answer = await this.request("GET", `/v1/agents/${encodeURIComponent(agent)}/nodes${query}`);
    if (answer.status !== 200) this.fail(answer);
    return answer.json as AgentNodes;
  }
}
