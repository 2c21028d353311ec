import { randomBytes } from "node:crypto";
import type { AgentList, AgentNodes, AgentSummary } from "../contracts/agents.js";
import type { ApiError } from "../contracts/errors.js";
import type { FeedCursor, FeedPage } from "../contracts/feed.js";
import type { IronicDelivery } from "../contracts/ironic.js";
import type { FenceAnswer, Lease, LeaseGrant } from "../contracts/leases.js";
import type { BulkResult, Node, NodeList } from "../contracts/nodes.js";
import type {
  Shard,
  ShardDefinition,
  ShardDefinitionList,
  ShardDefinitionWritten,
  ShardList,
  ShardSummary,
} from "../contracts/shards.js";
import type { BareMetalNode } from "../core/node.js";
import type {
  FenceOutcome,
  LeaseOutcome,
  LeaseView,
  RefusalReason,
  ReleaseOutcome,
} from "../core/lease/machine.js";
import type { AcquireArgs, LeaseClient, WaitedLeaseOutcome } from "../core/keeper/lease-keeper.js";

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
 * (401), or the token may not act here (403).
 */
export function isPermanentRefusal(error: unknown): error is BridgeError {
  return error instanceof BridgeError && (error.status === 401 || error.status === 403);
}

/**
 * The bridge does not lease the shard (404 shardbridge.shard.undefined): a typo'd name
 * (see serve --allow-undefined-shards), or a shard whose definition the store lost and
 * no bridge gave back yet (see UndefinedShard).
 */
export function isShardUndefined(error: unknown): error is BridgeError {
  return error instanceof BridgeError && error.code === "shardbridge.shard.undefined";
}

/** A lease an agent holds: which shard, as whom, under which token. */
export interface HeldLease {
  shard: string;
  agent: string;
  token: number;
}

/**
 * A lease as an answer shows it; 0 for a token the bridge did not show this caller. A
 * grant does not say when the lease began (no `since`): its `sinceUs` is NaN.
 */
const view = (lease: Lease | LeaseGrant): LeaseView => ({
  holder: lease.holder,
  token: lease.token ?? 0,
  ttlMs: lease.ttl_ms,
  sinceUs: "since" in lease ? Date.parse(lease.since) * 1000 : Number.NaN,
});

/** One request as the client hands it to its transport: the bridge's path, our bearer token, a JSON body. */
export interface BridgeRequest {
  method: string;
  /** below the bridge's base URL, e.g. /v1/shards/rack-1/lease */
  path: string;
  token: string;
  /** JSON, already encoded */
  body?: string;
  /** the whole request's, a waiting acquire's wait included */
  timeoutMs: number;
}

/**
 * How the client's requests travel, and their answers' status and text come back. An
 * agent has one client on its host and sends fetch's way (`fetchTransport`); a process
 * that carries thousands of agents at once (a benchmark's fleet) hands in a leaner one,
 * so that its own event loop is not what it measures. Everything else — the paths, the
 * bodies, the answers' reading, the keeper — stays the agent's own.
 */
export type BridgeTransport = (request: BridgeRequest) => Promise<{ status: number; text: string }>;

/** fetch (undici: keep-alive) to `baseUrl`, each request aborted at its timeout. */
export function fetchTransport(baseUrl: string): BridgeTransport {
  return async ({ method, path, token, body, timeoutMs }) => {
    const res = await fetch(new URL(path, baseUrl), {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body !== undefined && { body }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { status: res.status, text: await res.text() };
  };
}

/**
 * The typed client an agent uses to talk to the bridge over HTTP (keep-alive, bearer
 * token, a timeout per request). It is a LeaseClient, so a LeaseKeeper runs on it as it
 * runs on a Store.
 */
export class BridgeClient implements LeaseClient {
  private readonly transport: BridgeTransport;

  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    private readonly timeoutMs = 2000,
    transport?: BridgeTransport,
  ) {
    this.transport = transport ?? fetchTransport(baseUrl);
  }

  /** false once the bridge refused `wait_ms` (a bridge older than waiting acquires): then it is polled */
  private bridgeWaits = true;
  /** this client's name for itself in its heartbeats (HeartbeatInstance): one per process, as a rule */
  readonly instance = randomBytes(6).toString("hex");
  /** false once the bridge refused `instance` (a bridge older than it): heartbeats then name none */
  private bridgeTakesInstance = true;

  private async request(
    method: string,
    path: string,
    body?: unknown,
    /** more time than the timeout: a waiting acquire's wait */
    extraMs = 0,
  ): Promise<{ status: number; json: any }> {
    const { status, text } = await this.transport({
      method,
      path,
      token: this.token,
      ...(body !== undefined && { body: JSON.stringify(body) }),
      timeoutMs: this.timeoutMs + extraMs,
    });
    return { status, json: text === "" ? null : JSON.parse(text) };
  }

  /** Throw the first error of an API-SIG answer. */
  private fail(answer: { status: number; json: any }): never {
    const error = (answer.json?.errors?.[0] ?? {}) as Partial<ApiError>;
    throw new BridgeError(answer.status, error.code ?? "unknown", error.detail ?? "");
  }

  /** The lease refusal (409) in an answer; any other failure is thrown. */
  private refusalOf(answer: { status: number; json: any }): ApiError {
    if (answer.status !== 409) this.fail(answer);
    return answer.json.errors[0] as ApiError;
  }

  private leaseOutcome(answer: { status: number; json: any }): WaitedLeaseOutcome {
    if (answer.status === 200) {
      const grant = answer.json as LeaseGrant;
      const outcome: WaitedLeaseOutcome = { ok: true as const, ...view(grant) };
      if (grant.fence_key !== undefined) outcome.fenceKey = grant.fence_key;
      if (grant.waited_ms !== undefined) outcome.waitedMs = grant.waited_ms;
      return outcome;
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
  async shard(name: string): Promise<Shard | null> {
    const answer = await this.request("GET", `/v1/shards/${encodeURIComponent(name)}`);
    if (answer.status === 404) return null;
    if (answer.status !== 200) this.fail(answer);
    return answer.json as Shard;
  }

  /** GET /v1/shards: every shard with its node count and live lease (tokens for admin only). */
  async shards(): Promise<ShardSummary[]> {
    const answer = await this.request("GET", "/v1/shards");
    if (answer.status !== 200) this.fail(answer);
    return (answer.json as ShardList).shards;
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
    const json = answer.json as AgentList;
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
        answer.status === 400 && answer.json?.errors?.some((e: ApiError) => e.field === "wait_ms");
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
    return { allowed: (answer.json as FenceAnswer).allowed === true };
  }

  /** The shard's trait feed after its acknowledged cursor (only the holder, with its token). */
  async readFeed(shard: string, token: number): Promise<FeedPage> {
    const answer = await this.request("GET", `/v1/shards/${shard}/feed?token=${token}`);
    if (answer.status !== 200) this.fail(answer);
    return answer.json as FeedPage;
  }

  /** Acknowledge feed entries up to `id` under the holder's token. */
  async ackFeed(shard: string, token: number, id: string): Promise<string> {
    const answer = await this.request("POST", `/v1/shards/${shard}/feed/ack`, { token, id });
    if (answer.status !== 200) this.fail(answer);
    // never null after an ack: the cursor is then at `id` or past it
    return (answer.json as FeedCursor).cursor!;
  }

  /** Admin: upsert whole nodes in one request (at most 20,000). */
  async bulkUpsert(nodes: BareMetalNode[]): Promise<BulkResult> {
    const answer = await this.request("POST", "/v1/nodes/bulk", { nodes });
    if (answer.status !== 200) this.fail(answer);
    return answer.json as BulkResult;
  }

  /** Admin: change some fields of one node (JSON merge patch); the node as it is now. */
  async patchNode(uuid: string, patch: Partial<Omit<BareMetalNode, "uuid">>): Promise<Node> {
    const answer = await this.request("PATCH", `/v1/nodes/${uuid}`, patch);
    if (answer.status !== 200) this.fail(answer);
    return answer.json as Node;
  }

  /** Every shard definition (files' and the store's) and the store's version of them. */
  async shardDefinitions(): Promise<{ version: number; refreshMs: number; definitions: ShardDefinition[] }> {
    const answer = await this.request("GET", "/v1/shard-definitions");
    if (answer.status !== 200) this.fail(answer);
    const json = answer.json as ShardDefinitionList;
    return { version: json.version, refreshMs: json.refresh_ms, definitions: json.definitions };
  }

  /** Admin: define a shard in the store; answers it and how soon every bridge uses it. */
  async defineShard(
    name: string,
    body: { description?: string; lease_ttl_ms?: number; agents?: string[]; filling?: boolean },
  ): Promise<ShardDefinitionWritten> {
    const answer = await this.request("PUT", `/v1/shard-definitions/${encodeURIComponent(name)}`, body);
    if (answer.status !== 200 && answer.status !== 201) this.fail(answer);
    return answer.json as ShardDefinitionWritten;
  }

  /** Every node the bridge holds, page by page (admin). */
  async allNodes(pageSize = 10_000): Promise<Node[]> {
    const all: Node[] = [];
    let marker: string | null = null;
    do {
      const query: string = `/v1/nodes?limit=${pageSize}${marker === null ? "" : `&marker=${marker}`}`;
      const answer = await this.request("GET", query);
      if (answer.status !== 200) this.fail(answer);
      const page = answer.json as NodeList;
      all.push(...page.nodes);
      marker =
        page.next === null ? null : (new URL(page.next, this.baseUrl).searchParams.get("marker") ?? null);
    } while (marker !== null);
    return all;
  }

  /**
   * `shards`: what the agent serves; none puts it in the legacy ring pool (nova without
   * `[ironic] shard`). Sent as this client's instance: what other processes of the same
   * agent id declare (an `agent` and a `run`) adds up with it at the bridge.
   */
  async heartbeat(agent: string, shards: string[] = []): Promise<void> {
    const path = `/v1/agents/${encodeURIComponent(agent)}/heartbeat`;
    if (this.bridgeTakesInstance) {
      const answer = await this.request("POST", path, { shards, instance: this.instance });
      const refused =
        answer.status === 400 && answer.json?.errors?.some((e: ApiError) => /instance/.test(e.detail));
      if (!refused) {
        if (answer.status !== 200) this.fail(answer);
        return;
      }
      this.bridgeTakesInstance = false;
    }
    const answer = await this.request("POST", path, { shards });
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
