import type { Lease } from "../../contracts/leases.js";
import type { BareMetalNode } from "../../domain/node.js";
import type { LeaseView } from "../../lease/machine.js";

/**
 * A JSON string for a value that needs no escaping in the common case: node names, shard
 * keys and conductor groups are restricted to letters, digits and `-._~`; any other
 * string (an agent id may hold a quote) goes through JSON.stringify.
 */
function jsonString(value: string | null): string {
  if (value === null) return "null";
  return /^[A-Za-z0-9\-._~:@ ]*$/.test(value) ? `"${value}"` : JSON.stringify(value);
}

/**
 * A node as the API shows it, as JSON text, with `extra` fields (already JSON) after its
 * own: node lists run to tens of thousands of nodes, and writing each one directly costs
 * a fraction of building an object per node and stringifying the lot.
 */
export function nodeJson(node: BareMetalNode, extra = ""): string {
  return `${openNodeJson(node)}${extra}}`;
}

/** nodeJson without its closing brace, for fields to follow. */
export function openNodeJson(node: BareMetalNode): string {
  return (
    `{"uuid":"${node.uuid}","name":${jsonString(node.name)},"shard":${jsonString(node.shard)},` +
    `"conductor_group":${jsonString(node.conductor_group)},"instance_host":${jsonString(node.instance_host)}`
  );
}

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
