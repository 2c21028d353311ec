import { parseArgs } from "node:util";
import { BridgeClient } from "../agent/client.js";
import { BULK_MAX_NODES } from "../domain/node.js";
import { IronicClient } from "../ironic/client.js";
import { toBridgeNodes } from "../ironic/sync.js";
import { ConfigError } from "../config.js";

export const IRONIC_SYNC_USAGE = `  ironic-sync  load nodes and their shard keys from Ironic into the bridge
             --ironic URL    Ironic's API (env SHARDBRIDGE_IRONIC_URL)
             --bridge URL    the bridge (default http://127.0.0.1:6390)
             --token T       an admin token (env SHARDBRIDGE_TOKEN)
`;

/** Load Ironic's nodes (uuid, name, shard, conductor group) into the bridge, BULK_MAX_NODES (20,000) per request. */
export async function ironicSyncCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      bridge: { type: "string", default: process.env.SHARDBRIDGE_URL ?? "http://127.0.0.1:6390" },
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
    },
  });
  if (values.ironic === undefined)
    throw new ConfigError("ironic-sync: pass --ironic URL or set SHARDBRIDGE_IRONIC_URL");
  if (values.token === undefined)
    throw new ConfigError("ironic-sync: pass --token (an admin token) or set SHARDBRIDGE_TOKEN");
  const bridge = new BridgeClient(values.bridge!, values.token);
  // Ironic knows a node's instance but not its host: keep the host the bridge was told.
  const instanceHost = new Map((await bridge.allNodes()).map((n) => [n.uuid, n.instance_host]));
  const nodes = toBridgeNodes(
    await new IronicClient(values.ironic, process.env.SHARDBRIDGE_IRONIC_TOKEN).nodes(),
    instanceHost,
  );
  let created = 0;
  let updated = 0;
  for (let i = 0; i < nodes.length; i += BULK_MAX_NODES) {
    const answer = await bridge.bulkUpsert(nodes.slice(i, i + BULK_MAX_NODES));
    created += answer.created;
    updated += answer.updated;
  }
  process.stdout.write(`${JSON.stringify({ nodes: nodes.length, created, updated })}\n`);
}
