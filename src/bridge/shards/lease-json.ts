import type { Lease } from "../../contracts/leases.js";
import type { LeaseView } from "../../core/lease/machine.js";

/**
 * A live lease as the API shows it. The token only where `showToken` (an operator's view,
 * or the holder's own lease): a token is what lets writes pass the fence, and an older
 * process of the same agent id must never learn its successor's from a read or a refusal.
 */
export function leaseJson(view: LeaseView, showToken: boolean): Lease {
  return {
    holder: view.holder,
    token: showToken ? view.token : null,
    ttl_ms: view.ttlMs,
    since: new Date(Math.floor(view.sinceUs / 1000)).toISOString(),
  };
}
