import { parseArgs } from "node:util";
import { BridgeClient } from "../agent/bridge-client.js";
import { IronicClient, type IronicNode } from "../upstream/ironic-client.js";
import { syncNodes } from "../bridge/ironic/sync.js";
import { ironicAuthFromEnv } from "../upstream/keystone.js";
import { ConfigError } from "../runtime/config.js";
import { BRIDGE_FLAG, BRIDGE_USAGE, IRONIC_AUTH_USAGE, httpUrlFlag, tokenFlag } from "./io.js";

export const IRONIC_SYNC_USAGE = `  ironic-sync  load nodes and their shard keys from Ironic into the bridge
             --ironic URL    Ironic's API (env SHARDBRIDGE_IRONIC_URL)
${BRIDGE_USAGE}             --token T       an admin token (env SHARDBRIDGE_TOKEN)
${IRONIC_AUTH_USAGE}`;

/** Load Ironic's nodes (uuid, name, shard, conductor group) into the bridge, BULK_MAX_NODES (20,000) per request. */
export async function ironicSyncCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      bridge: BRIDGE_FLAG,
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
    },
  });
  if (values.ironic === undefined)
    throw new ConfigError("ironic-sync: pass --ironic URL or set SHARDBRIDGE_IRONIC_URL");
  if (values.token === undefined)
    throw new ConfigError("ironic-sync: pass --token (an admin token) or set SHARDBRIDGE_TOKEN");
  const bridge = new BridgeClient(
    httpUrlFlag("bridge", values.bridge, "SHARDBRIDGE_URL"),
    tokenFlag(values.token),
  );
  const ironic = new IronicClient(
    httpUrlFlag("ironic", values.ironic, "SHARDBRIDGE_IRONIC_URL"),
    ironicAuthFromEnv(),
  );
  const counts = await syncFromIronic(bridge, () => ironic.nodes());
  process.stdout.write(`${JSON.stringify(counts)}\n`);
}

/**
 * Copy Ironic's nodes (as `readIronic` lists them) into the bridge, keeping the instance
 * hosts the bridge was told, BULK_MAX_NODES per request; answers the counts.
 */
export function syncFromIronic(
  bridge: BridgeClient,
  readIronic: () => Promise<IronicNode[]>,
): Promise<{ nodes: number; created: number; updated: number }> {
  return syncNodes(
    {
      definitionsVersion: async () => (await bridge.shardDefinitions()).version,
      instanceHosts: async () => new Map((await bridge.allNodes()).map((n) => [n.uuid, n.instance_host])),
      upsert: (nodes) => bridge.bulkUpsert(nodes),
    },
    readIronic,
  );
}
