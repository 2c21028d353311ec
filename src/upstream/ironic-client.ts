import type { BareMetalNode } from "../core/node.js";
import { parseIronicEndpoint } from "./ironic-endpoint.js";
import { staticAuth, type IronicAuth } from "./keystone.js";

/** The microversion this bridge speaks: 1.82 brings the node `shard` field. */
export const IRONIC_API_VERSION = "1.82";

export class IronicError extends Error {
  constructor(
    readonly status: number,
    /** Ironic's own words (its faultstring or description) */
    readonly detail: string,
  ) {
    super(`Ironic answered ${status}: ${detail}`);
    this.name = "IronicError";
  }
}

export interface IronicClientOptions {
  /** one attempt's limit, the Keystone token it may first need included (default 10 s) */
  timeoutMs?: number;
  /** attempts for a call Ironic answers 409 (node locked), default 6 */
  attempts?: number;
  /** first backoff after a 409, doubled each time, default 200 ms */
  backoffMs?: number;
  /** injectable for tests */
  sleep?: (ms: number) => Promise<void>;
}

/** Ironic double-encodes errors: {"error_message": "<JSON with faultstring or description>"}. */
function ironicMessage(text: string): string {
  try {
    const outer = JSON.parse(text) as { error_message?: string };
    const inner = JSON.parse(outer.error_message ?? "{}") as { faultstring?: string; description?: string };
    return inner.faultstring ?? inner.description ?? text;
  } catch {
    return text;
  }
}

/**
 * The calls the bridge makes to Ironic's API, authenticated by `auth` (noauth, a fixed
 * token, or Keystone: see keystone.ts; a 401 gets one more try with a new token).
 * Traits change one at a time (`PUT`/`DELETE /v1/nodes/{n}/traits/{t}`), never by
 * replacing the whole list, so traits set by others survive.
 */
export class IronicClient {
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly backoffMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Ironic's API: scheme, host and port, no credentials */
  private readonly origin: string;
  /** the path Ironic's API is served under (devstack's `/baremetal`; "" at the root), no trailing slash */
  private readonly basePath: string;
  /** `Authorization: Basic …` from credentials in the endpoint's URL (Ironic's http_basic), or none */
  private readonly basic: Record<string, string>;

  constructor(
    endpoint: string,
    private readonly auth: IronicAuth = staticAuth(),
    options: IronicClientOptions = {},
  ) {
    // fetch refuses a URL that carries credentials: they are sent as Basic instead.
    const { origin, basePath, credentials } = parseIronicEndpoint(endpoint);
    this.origin = origin;
    this.basePath = basePath;
    this.basic =
      credentials === null
        ? {}
        : {
            authorization: `Basic ${Buffer.from(`${credentials.user}:${credentials.password}`).toString("base64")}`,
          };
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.attempts = options.attempts ?? 6;
    this.backoffMs = options.backoffMs ?? 200;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  private async call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = {
      "x-openstack-ironic-api-version": IRONIC_API_VERSION,
      accept: "application/json",
    };
    if (body !== undefined) headers["content-type"] = "application/json";
    for (let attempt = 1; ; attempt++) {
      // One limit for the attempt, a token fetched first included: the delivery's order
      // rests on a call ending within its timeout of being started.
      const signal = AbortSignal.timeout(this.timeoutMs);
      const send = async () => {
        const auth = await this.auth.headers(signal);
        const res = await fetch(this.urlOf(path), {
          method,
          headers: { ...headers, ...this.basic, ...auth },
          ...(body !== undefined && { body: JSON.stringify(body) }),
          signal,
        });
        return { auth, status: res.status, text: await res.text() };
      };
      let answer = await send();
      // 401: the token was refused (revoked, expired early, Keystone's keys rotated): once more with a new one.
      if (answer.status === 401 && this.auth.refused(answer.auth)) answer = await send();
      const { status, text } = answer;
      // 409: the node is locked by a conductor task; it frees itself, so wait and retry.
      if (status === 409 && attempt < this.attempts) {
        await this.sleep(this.backoffMs * 2 ** (attempt - 1));
        continue;
      }
      return { status, text };
    }
  }

  /** `path` (and its query) under Ironic's base path: a path from the root would drop it. */
  private urlOf(path: string): string {
    return `${this.origin}${this.basePath}${path}`;
  }

  /** A `next` link of Ironic's as a path under its base path, as call() takes it. */
  private pathOf(link: string): string {
    const url = new URL(link);
    const prefix = this.basePath;
    const path = url.pathname.startsWith(`${prefix}/`) ? url.pathname.slice(prefix.length) : url.pathname;
    return path + url.search;
  }

  async addTrait(node: string, trait: string): Promise<void> {
    const { status, text } = await this.call("PUT", `/v1/nodes/${node}/traits/${trait}`);
    if (status !== 204) throw new IronicError(status, ironicMessage(text));
  }

  /** Removing a trait the node does not have (404) counts as done. */
  async removeTrait(node: string, trait: string): Promise<"removed" | "absent"> {
    const { status, text } = await this.call("DELETE", `/v1/nodes/${node}/traits/${trait}`);
    if (status === 204) return "removed";
    if (status === 404 && /trait/i.test(ironicMessage(text))) return "absent";
    throw new IronicError(status, ironicMessage(text));
  }

  async traits(node: string): Promise<string[]> {
    const { status, text } = await this.call("GET", `/v1/nodes/${node}/traits`);
    if (status !== 200) throw new IronicError(status, ironicMessage(text));
    return (JSON.parse(text) as { traits: string[] }).traits;
  }

  /** Every node with its shard key and instance, page by page (Ironic does not know an instance's host). */
  async nodes(pageSize = 1000): Promise<IronicNode[]> {
    type Wire = {
      uuid: string;
      name?: string | null;
      shard?: string | null;
      conductor_group?: string;
      instance_uuid?: string | null;
    };
    const wire = await this.list<Wire>("fields=uuid,name,shard,conductor_group,instance_uuid", pageSize);
    return wire.map((n) => ({
      uuid: n.uuid,
      name: n.name ?? null,
      shard: n.shard ?? null,
      conductor_group: n.conductor_group ?? "",
      instance_uuid: n.instance_uuid ?? null,
    }));
  }

  /** Set the node's shard key (PATCH, API 1.82). */
  async setShard(node: string, shard: string): Promise<void> {
    const { status, text } = await this.call("PATCH", `/v1/nodes/${node}`, [
      { op: "add", path: "/shard", value: shard },
    ]);
    if (status !== 200) throw new IronicError(status, ironicMessage(text));
  }

  /**
   * The nodes whose last inspection finished at or after `sinceMs` (every node with one
   * when null), newest first. Ironic sets `inspection_finished_at` when an inspection ends
   * and clears it when the next one starts, so a node being inspected (or never inspected)
   * has none and is left out. Ironic has no "changed since" filter: the list is sorted by
   * that time, newest first, and read only until a page reaches one older than `sinceMs` —
   * one page a poll for a fleet that inspects fewer than `pageSize` nodes between polls.
   * (Nodes without a time sort last on MySQL and SQLite; on PostgreSQL first, where they
   * are read and skipped.)
   */
  async inspectionsSince(sinceMs: number | null, pageSize = 1000): Promise<InspectionMark[]> {
    type Wire = { uuid: string; inspection_finished_at?: string | null };
    const older = (n: Wire) =>
      sinceMs !== null && !!n.inspection_finished_at && Date.parse(n.inspection_finished_at) < sinceMs;
    const wire = await this.list<Wire>(
      "fields=uuid,inspection_finished_at&sort_key=inspection_finished_at&sort_dir=desc",
      pageSize,
      (page) => page.some(older),
    );
    return wire.flatMap((n) =>
      n.inspection_finished_at && !older(n) ? [{ uuid: n.uuid, finishedAt: n.inspection_finished_at }] : [],
    );
  }

  /**
   * The node's last inspection data (API 1.81): `inventory` and `plugin_data`. Null when
   * Ironic holds none for it (404), e.g. data kept only by a standalone inspector.
   */
  async inventory(node: string): Promise<{ inventory: unknown; plugin_data?: unknown } | null> {
    const { status, text } = await this.call("GET", `/v1/nodes/${node}/inventory`);
    if (status === 404) return null;
    if (status !== 200) throw new IronicError(status, ironicMessage(text));
    return JSON.parse(text) as { inventory: unknown; plugin_data?: unknown };
  }

  /**
   * GET /v1/nodes with `query` (fields, sort), following `next` links to the end, or until
   * `enough` says a page holds all that is wanted.
   */
  private async list<T>(
    query: string,
    pageSize: number,
    enough: (page: T[]) => boolean = () => false,
  ): Promise<T[]> {
    const all: T[] = [];
    let path: string | null = `/v1/nodes?${query}&limit=${pageSize}`;
    while (path !== null) {
      const { status, text } = await this.call("GET", path);
      if (status !== 200) throw new IronicError(status, ironicMessage(text));
      const page = JSON.parse(text) as { nodes: T[]; next?: string };
      all.push(...page.nodes);
      if (enough(page.nodes)) break;
      path = page.next === undefined ? null : this.pathOf(page.next);
    }
    return all;
  }
}

/** A node as Ironic lists it for the bridge. */
export type IronicNode = Omit<BareMetalNode, "instance_host"> & { instance_uuid: string | null };

/** When a node's last inspection finished, as Ironic wrote it (ISO 8601, UTC). */
export interface InspectionMark {
  uuid: string;
  finishedAt: string;
}
