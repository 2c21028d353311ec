import type { LeaseClient } from "../../src/core/keeper/lease-keeper.js";
import { acquireWhenReady } from "../helpers/leases.js";
import { closedLoop, type Measured } from "./stats.js";

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
