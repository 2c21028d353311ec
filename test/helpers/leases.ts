import type { LeaseClient } from "../../src/core/keeper/lease-keeper.js";

/** A grant: its token, and the fence key it was answered with (none from a store that mints none). */
export interface Grant {
  token: number;
  fenceKey: string;
}

/**
 * A lease for `agent` on `shard`, once the store grants it: a just-started store grants
 * no lease on an unknown shard for one TTL (see recoveryWaitMs), so wait that out. Any
 * other refusal is an error: tests and benches ask for shards nobody else holds.
 */
export async function grantWhenReady(client: LeaseClient, shard: string, agent: string): Promise<Grant> {
  for (;;) {
    const got = await client.acquire({ shard, agent, ttlMs: 1000 });
    if (got.ok) return { token: got.token, fenceKey: got.fenceKey ?? "" };
    if (got.reason !== "recovering") throw new Error(`acquire of ${shard} refused: ${got.reason}`);
    await new Promise((r) => setTimeout(r, got.retryAfterMs ?? 100));
  }
}

/** The token of grantWhenReady's lease. */
export async function acquireWhenReady(client: LeaseClient, shard: string, agent: string): Promise<number> {
  return (await grantWhenReady(client, shard, agent)).token;
}
