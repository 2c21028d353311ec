import type { AgentSummary } from "../../contracts/agents.js";
import type { ShardSummary } from "../../contracts/shards.js";
import { yieldToLoop } from "../../runtime/loop.js";
import {
  agentRow,
  headline,
  ironicLine,
  shardRow,
  type AgentRow,
  type ShardRow,
  type StatusSnapshot,
} from "./status-view.js";

/*
 * What the status page draws, built here from a status snapshot with the same words as
 * `shardbridge status` (status-view.ts): the page's script only puts these strings and
 * numbers into the DOM. Pure but for encodePageModel, which lets the event loop run.
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

/** The words at the top of the page. */
function pageHead(snapshot: StatusSnapshot): Omit<PageModel, "shards" | "agents"> {
  const { ironic } = snapshot;
  return {
    at: snapshot.at,
    headline: headline(snapshot),
    ironic: ironicLine(ironic),
    ironic_lag_ms: ironic.configured && ironic.pending_changes > 0 ? ironic.oldest_pending_ms : null,
  };
}

/** A shard's row; `ttlMs` its TTL (its definition's). No lease token, whoever looks: the page is for a screen on a wall. */
function pageShard(s: ShardSummary, nowMs: number, ttlMs: number): PageShard {
  const { token: _token, ...row } = shardRow(s, nowMs);
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
}

const pageAgent = (a: AgentSummary, nowMs: number): PageAgent => ({ ...agentRow(a, nowMs), up: a.up });

/** The page's model of `snapshot`; `ttlMsOf` gives a shard's TTL (its definition's). */
export function pageModel(snapshot: StatusSnapshot, ttlMsOf: (shard: string) => number): PageModel {
  const now = Date.parse(snapshot.at);
  return {
    ...pageHead(snapshot),
    shards: snapshot.shards.map((s) => pageShard(s, now, ttlMsOf(s.name))),
    agents: snapshot.agents.map((a) => pageAgent(a, now)),
  };
}

/** Rows built and encoded between two turns of the event loop. */
const ROWS_PER_TURN = 250;

/**
 * pageModel(snapshot) as JSON text, the same, built and encoded ROWS_PER_TURN rows at a
 * time with the event loop let run between: a fleet of thousands of shards and agents
 * costs tens of ms to describe, and every renew waits behind the one loop meanwhile.
 */
export async function encodePageModel(
  snapshot: StatusSnapshot,
  ttlMsOf: (shard: string) => number,
): Promise<string> {
  const now = Date.parse(snapshot.at);
  const list = async <T>(items: readonly T[], row: (item: T) => unknown) => {
    const parts: string[] = [];
    for (let i = 0; i < items.length; i += ROWS_PER_TURN) {
      if (i > 0) await yieldToLoop();
      parts.push(
        items
          .slice(i, i + ROWS_PER_TURN)
          .map((item) => JSON.stringify(row(item)))
          .join(","),
      );
    }
    return `[${parts.join(",")}]`;
  };
  const shards = await list(snapshot.shards, (s) => pageShard(s, now, ttlMsOf(s.name)));
  const agents = await list(snapshot.agents, (a) => pageAgent(a, now));
  return `${JSON.stringify(pageHead(snapshot)).slice(0, -1)},"shards":${shards},"agents":${agents}}`;
}
