import {
  agentRow,
  headline,
  ironicLine,
  shardRow,
  type AgentRow,
  type ShardRow,
  type StatusSnapshot,
} from "../status-view.js";

/*
 * What the status page draws, built here from a status snapshot with the same words as
 * `shardbridge status` (status-view.ts): the page's script only puts these strings and
 * numbers into the DOM. Pure.
 */

/**
 * How a lease's time left looks. The holder renews every TTL/3, so a healthy lease has
 * between 2/3 of its TTL and all of it left (less a look's delay); under half, renewals
 * are late; under a third, the holder has stopped acting by its own clock (it self-fences
 * at 2/3 TTL after its last renew) and the shard is about to be free.
 */
export type LeaseHealth = "renewing" | "late" | "ending";

export interface PageShard extends Omit<ShardRow, "token"> {
  held: boolean;
  /** the unsharded nodes ("None"): nova's ring places them, no lease is ever held on them */
  unsharded: boolean;
  /** time left as a fraction of the shard's TTL, 0..1 (0 when nobody holds it) */
  left_fraction: number;
  health: LeaseHealth | null;
  ttl: string;
}

export interface PageAgent extends AgentRow {
  up: boolean;
}

export interface PageModel {
  at: string;
  headline: string;
  ironic: string;
  /** how long the oldest trait change waiting for Ironic has waited, ms; null: none, or no Ironic */
  ironic_lag_ms: number | null;
  shards: PageShard[];
  agents: PageAgent[];
}

function health(fraction: number): LeaseHealth {
  if (fraction >= 0.5) return "renewing";
  if (fraction >= 1 / 3) return "late";
  return "ending";
}

/**
 * The page's model of `snapshot`; `ttlMsOf` gives a shard's TTL (its definition's). Lease
 * tokens are left out whoever looks: the page is for a screen on a wall.
 */
export function pageModel(snapshot: StatusSnapshot, ttlMsOf: (shard: string) => number): PageModel {
  const now = Date.parse(snapshot.at);
  const { ironic } = snapshot;
  return {
    at: snapshot.at,
    headline: headline(snapshot),
    ironic: ironicLine(ironic),
    ironic_lag_ms: ironic.configured && ironic.pending_changes > 0 ? ironic.oldest_pending_ms : null,
    shards: snapshot.shards.map((s) => {
      const { token: _token, ...row } = shardRow(s, now);
      const ttlMs = ttlMsOf(s.name);
      const fraction = s.lease === null ? 0 : Math.min(1, Math.max(0, s.lease.ttl_ms / ttlMs));
      return {
        ...row,
        held: s.lease !== null,
        // GET /v1/shards gives the unsharded pool, and only it, no feed
        unsharded: s.feed_lag_ms === null,
        left_fraction: fraction,
        health: s.lease === null ? null : health(fraction),
        ttl: `${ttlMs / 1000} s`,
      };
    }),
    agents: snapshot.agents.map((a) => ({ ...agentRow(a, now), up: a.up })),
  };
}
