import type { LeaseClient } from "../../src/agent/lease-keeper.js";
import { closedLoop, type Measured } from "./stats.js";

/**
 * A just-started store grants no lease on an unknown shard for one TTL (see
 * recoveryWaitMs): acquire with the shortest TTL and wait that out.
 */
export async function acquireWhenReady(client: LeaseClient, shard: string, agent: string): Promise<number> {
  for (;;) {
    const got = await client.acquire({ shard, agent, ttlMs: 1000 });
    if (got.ok) return got.token;
    if (got.reason !== "recovering") throw new Error(`bench acquire refused: ${got.reason}`);
    await new Promise((r) => setTimeout(r, got.retryAfterMs ?? 100));
  }
}

/**
 * `concurrency` agents, each holding its own shard `${prefix}-N` and renewing it in a
 * closed loop: the steady state of a fleet where every active agent renews. `clientOf`
 * gives the client agent N talks through (one shared Store, or one HTTP client each).
 */
export async function renewLoop(
  clientOf: (agent: number) => LeaseClient,
  total: number,
  concurrency: number,
  prefix = "bench",
): Promise<Measured> {
  const tokens: number[] = [];
  for (let c = 0; c < concurrency; c++) {
    tokens.push(await acquireWhenReady(clientOf(c), `${prefix}-${c}`, `agent-${c}`));
  }
  return closedLoop(total, concurrency, async (i) => {
    const c = i % concurrency;
    const lease = { shard: `${prefix}-${c}`, agent: `agent-${c}`, token: tokens[c]!, ttlMs: 60_000 };
    const out = await clientOf(c).renew(lease);
    if (!out.ok) throw new Error(`renew refused: ${out.reason}`);
  });
}
