import type { IronicAuth } from "./keystone.js";
import {
  novaTimeMs,
  type InstanceAction,
  type InstanceActionEvent,
  type RebootType,
  type ServerState,
} from "../core/nova-preempted.js";

/**
 * The compute API's version these calls speak: `changes-since` and `limit` on instance
 * actions (2.58, 2.66), and an event's `details` to an admin (2.84).
 */
export const COMPUTE_API_VERSION = "2.84";

export class ComputeApiError extends Error {
  constructor(
    readonly status: number,
    /** nova's own words */
    readonly detail: string,
  ) {
    super(`nova-api answered ${status}: ${detail}`);
    this.name = "ComputeApiError";
  }
}

/** A server on the host, as the list shows it, and when nova last changed it. */
export interface HostServer extends ServerState {
  /** nova's `updated` */
  updated: string;
}

/** nova's error shape: {"<kind>": {"code", "message"}}. */
function novaMessage(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, { message?: string }>;
    const first = Object.values(body)[0];
    return first?.message ?? text.slice(0, 500);
  } catch {
    return text.slice(0, 500);
  }
}

/**
 * The few compute API calls `run` makes as an admin (`--resend-preempted`): the servers of
 * its host, a server's latest action and its events, and a reboot. Authenticated by Keystone
 * (the standard OS_* variables; a 401 gets one more try with a new token); every call has a
 * timeout of its own.
 */
export class ComputeApi {
  /** the compute endpoint without a trailing slash (http://nova.internal:8774/v2.1) */
  private readonly base: string;

  constructor(
    endpoint: string,
    private readonly auth: IronicAuth,
    private readonly timeoutMs = 10_000,
  ) {
    this.base = endpoint.replace(/\/+$/, "");
  }

  /** The servers of `host` (every project) that nova changed at or after `since` (ms of the epoch). */
  async serversOf(host: string, since: number): Promise<HostServer[]> {
    const query = new URLSearchParams({
      host,
      all_tenants: "1",
      "changes-since": new Date(since).toISOString(),
    });
    const { servers } = (await this.json("GET", `/servers/detail?${query}`)) as {
      servers: Array<Record<string, unknown>>;
    };
    return servers.map((s) => ({
      id: String(s.id),
      vmState: String(s["OS-EXT-STS:vm_state"]),
      taskState: (s["OS-EXT-STS:task_state"] as string | null) ?? null,
      updated: String(s.updated),
    }));
  }

  /** The server's `count` newest instance actions, newest first. */
  async latestActions(server: string, count: number): Promise<InstanceAction[]> {
    const { instanceActions } = (await this.json(
      "GET",
      `/servers/${encodeURIComponent(server)}/os-instance-actions?limit=${count}`,
    )) as { instanceActions: Array<{ action: string; request_id: string; start_time: string }> };
    return instanceActions.map((a) => ({
      action: a.action,
      requestId: a.request_id,
      startTime: a.start_time,
    }));
  }

  /** The events of one of the server's actions. */
  async events(server: string, requestId: string): Promise<InstanceActionEvent[]> {
    const { instanceAction } = (await this.json(
      "GET",
      `/servers/${encodeURIComponent(server)}/os-instance-actions/${encodeURIComponent(requestId)}`,
    )) as {
      instanceAction: {
        events?: Array<{
          event: string;
          result: string | null;
          start_time: string;
          finish_time: string | null;
          details?: string | null;
        }>;
      };
    };
    return (instanceAction.events ?? []).map((e) => ({
      event: e.event,
      result: e.result,
      startTime: e.start_time,
      finishTime: e.finish_time,
      details: e.details ?? null,
    }));
  }

  /**
   * When `host`'s nova-compute last reported to nova (its service's `updated_at`, ms of the
   * epoch); null when nova has no such service or it never reported. nova-compute reports
   * only once its RPC server is consuming the host's queue (nova's Service.start).
   */
  async computeReportedAt(host: string): Promise<number | null> {
    const query = new URLSearchParams({ host, binary: "nova-compute" });
    const { services } = (await this.json("GET", `/os-services?${query}`)) as {
      services: Array<{ updated_at?: string | null }>;
    };
    const times = services
      .map((s) => (s.updated_at ? novaTimeMs(s.updated_at) : NaN))
      .filter(Number.isFinite);
    return times.length === 0 ? null : Math.max(...times);
  }

  /** Reboot the server: nova's request id for it (the new instance action's). */
  async reboot(server: string, type: RebootType): Promise<string | null> {
    const res = await this.send("POST", `/servers/${encodeURIComponent(server)}/action`, {
      reboot: { type },
    });
    if (res.status !== 202) throw new ComputeApiError(res.status, novaMessage(await res.text()));
    await res.body?.cancel();
    return res.headers.get("x-openstack-request-id");
  }

  private async json(method: string, path: string): Promise<unknown> {
    const res = await this.send(method, path);
    const text = await res.text();
    if (res.status !== 200) throw new ComputeApiError(res.status, novaMessage(text));
    return JSON.parse(text);
  }

  /** One call, and once more with a new token if Keystone's was refused (401). */
  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    for (let attempt = 1; ; attempt++) {
      const signal = AbortSignal.timeout(this.timeoutMs);
      const headers = await this.auth.headers(signal);
      const res = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          ...headers,
          accept: "application/json",
          "openstack-api-version": `compute ${COMPUTE_API_VERSION}`,
          ...(body !== undefined && { "content-type": "application/json" }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal,
      });
      if (res.status !== 401 || attempt > 1 || !this.auth.refused(headers)) return res;
      await res.body?.cancel();
    }
  }
}
