import type { FenceOutcome, LeaseView } from "../../core/lease/machine.js";
import { logger } from "../../runtime/log.js";
import type { FenceRequest } from "../../core/lease/bounds.js";
import type { FenceInput } from "../../store/ports/leases.js";
import type { Admit, Store } from "../../store/store.js";
import type { ShardCatalog } from "./catalog.js";

/**
 * End the lease `current` of an agent that `shard`'s definition no longer names: released
 * under its own token, so a standby the definition names is granted at once rather than
 * after the TTL. (A release under a token that is no longer the live one changes nothing.)
 */
export async function endRevoked(
  store: Store,
  shard: string,
  current: { holder: string; token: number },
): Promise<void> {
  const ended = await store.release({ shard, agent: current.holder, token: current.token });
  if (ended.ok) logger.warn("lease-revoked", { shard, agent: current.holder, token: current.token });
}

/**
 * May a write under `token` happen now in `shard`: the store's fence, and the shard's
 * definition (kept fresh within a second, see StoredDefinitions) still naming the holder.
 * A holder removed from the definition is refused at once — not when its lease runs
 * out — and its lease is ended.
 */
export async function fenceServing(
  store: Store,
  catalog: ShardCatalog,
  args: FenceRequest,
  admit?: Admit<FenceInput>,
): Promise<FenceOutcome> {
  const outcome = await store.fence(args, admit);
  const current: LeaseView | null = outcome.current;
  if (!outcome.allowed || current === null || catalog.mayServe(args.shard, current.holder)) return outcome;
  await endRevoked(store, args.shard, current);
  return { allowed: false, reason: "expired", current: null };
}
