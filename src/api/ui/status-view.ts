import type { AgentSummary } from "../../contracts/agents.js";
import type { IronicDelivery } from "../../contracts/ironic.js";
import type { ShardSummary } from "../../contracts/shards.js";

/*
 * What an operator reads of the bridge's state, as words and numbers: one function per
 * line and column, used by `shardbridge status` for its tables and by the status page for
 * its rows, so both say the same thing the same way. Pure: the snapshot carries its time.
 */

/**
 * What the views read of GET /v1/ironic/delivery: whether there is an Ironic, the lag and
 * the batches (the rest of the answer is for a closer look).
 */
export type DeliveryLine =
  | { configured: false }
  | Pick<
      Extract<IronicDelivery, { configured: true }>,
      "configured" | "durable" | "pending_changes" | "oldest_pending_ms" | "batches"
    >;

/** What one look at the bridge found: GET /v1/shards, /v1/agents and /v1/ironic/delivery at `at`. */
export interface StatusSnapshot {
  at: string;
  shards: ShardSummary[];
  agents: AgentSummary[];
  down_after_ms: number;
  ironic: DeliveryLine;
}

/** A duration as the tables show it: "5.4 s". */
export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** "42 s ago", "3 min ago", "2 h ago": how long before `nowMs` an ISO time was. */
export function ago(iso: string | null, nowMs: number): string {
  if (iso === null || iso === "") return "never";
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

/** One line on delivery to Ironic: its lag first, what an operator acts on. */
export function ironicLine(ironic: DeliveryLine): string {
  if (!ironic.configured) return "Ironic delivery: not configured (no --ironic)";
  const { pending_changes: pending, oldest_pending_ms: oldestMs, batches } = ironic;
  const waiting =
    pending === 0 ? "nothing pending" : `${pending} trait changes pending, the oldest ${seconds(oldestMs)}`;
  return (
    `Ironic delivery: ${waiting}; ${batches.delivered} batches delivered, ${batches.retried} retried, ` +
    `${batches.given_up} given up${ironic.durable ? "" : " (kept in the bridge's memory only)"}`
  );
}

/** "1 of 2 shards held, 1 of 2 agents up (down after 60 s silent)" */
export function headline(snapshot: StatusSnapshot): string {
  const held = snapshot.shards.filter((s) => s.lease !== null).length;
  const up = snapshot.agents.filter((a) => a.up).length;
  return (
    `${held} of ${snapshot.shards.length} shards held, ${up} of ${snapshot.agents.length} agents up ` +
    `(down after ${snapshot.down_after_ms / 1000} s silent)`
  );
}

/** A shard as a row of words; "-" where there is nothing to say. */
export interface ShardRow {
  shard: string;
  nodes: string;
  holder: string;
  token: string;
  left: string;
  since: string;
  feedLag: string;
}

export const SHARD_COLUMNS: Record<keyof ShardRow, string> = {
  shard: "SHARD",
  nodes: "NODES",
  holder: "HOLDER",
  token: "TOKEN",
  left: "LEFT",
  since: "SINCE",
  feedLag: "FEED LAG",
};

export function shardRow(s: ShardSummary, nowMs: number): ShardRow {
  return {
    shard: s.name,
    nodes: String(s.count),
    holder: s.lease?.holder ?? "-",
    token: s.lease === null ? "-" : (s.lease.token?.toString() ?? "(hidden)"),
    left: s.lease === null ? "-" : seconds(s.lease.ttl_ms),
    since: s.lease === null ? "-" : `${s.lease.since.slice(11, 19)} (${ago(s.lease.since, nowMs)})`,
    feedLag: s.feed_lag_ms === null ? "-" : s.feed_lag_ms === 0 ? "caught up" : seconds(s.feed_lag_ms),
  };
}

/** An agent as a row of words. */
export interface AgentRow {
  agent: string;
  state: string;
  holds: string;
  serves: string;
  lastSeen: string;
}

export const AGENT_COLUMNS: Record<keyof AgentRow, string> = {
  agent: "AGENT",
  state: "STATE",
  holds: "HOLDS",
  serves: "SERVES",
  lastSeen: "LAST SEEN",
};

export function agentRow(a: AgentSummary, nowMs: number): AgentRow {
  return {
    agent: a.id,
    state: a.up ? "up" : "down",
    holds: a.shards.join(",") || "-",
    // An agent may declare shards and still be in nova's pool: its shards carry no nodes
    // yet, or a migration is filling them (src/core/ring/membership.ts).
    serves: a.legacy_pool
      ? a.serves.length > 0
        ? `${a.serves.join(",")} +ring`
        : "(legacy ring)"
      : a.serves.join(",") || "-",
    lastSeen: ago(a.last_seen, nowMs),
  };
}
