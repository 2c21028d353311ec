import type { BareMetalNode } from "../domain/node.js";
import type { IronicNode } from "./client.js";

/**
 * Ironic's nodes as the bridge keeps them. Ironic knows a node's instance but not the
 * instance's host, so the host the bridge was told before (`knownHosts`) is kept.
 */
export function toBridgeNodes(
  nodes: readonly IronicNode[],
  knownHosts: ReadonlyMap<string, string | null> = new Map(),
): BareMetalNode[] {
  return nodes.map(({ instance_uuid: _instance, ...node }) => ({
    ...node,
    instance_host: knownHosts.get(node.uuid) ?? null,
  }));
}
