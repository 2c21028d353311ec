import type { BareMetalNode } from "../core/node.js";
import { hostKey } from "../core/names.js";

/** Between the fields of a record: no field of a node may hold a control character. */
const SEP = "\u001f";

/**
 * A node's fields as one string, "shard␟name␟conductor_group␟instance_host[␟host key]",
 * '' standing for null, the lower-cased host key only where it differs from the host.
 * The Redis registry stores it in a data bucket under the uuid (see nodes-common.lua,
 * about 70 bytes a node), and the bulk decoder hands nodes back from its worker in it.
 */
export function encodeNode(node: BareMetalNode): string {
  const host = node.instance_host ?? "";
  const fields = [node.shard ?? "", node.name ?? "", node.conductor_group, host];
  if (hostKey(host) !== host) fields.push(hostKey(host));
  return fields.join(SEP);
}

export function decodeNode(uuid: string, record: string): BareMetalNode {
  const [shard, name, group, host] = record.split(SEP) as [string, string, string, string];
  return {
    uuid,
    name: name === "" ? null : name,
    shard: shard === "" ? null : shard,
    conductor_group: group,
    instance_host: host === "" ? null : host,
  };
}
