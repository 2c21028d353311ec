import type { BareMetalNode } from "../core/node.js";

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
  return (
    `{"uuid":"${node.uuid}","name":${jsonString(node.name)},"shard":${jsonString(node.shard)},` +
    `"conductor_group":${jsonString(node.conductor_group)},"instance_host":${jsonString(node.instance_host)}` +
    `${extra}}`
  );
}
