import { parseArgs } from "node:util";
import { BridgeClient } from "../agent/bridge-client.js";
import { BULK_MAX_NODES } from "../domain/node.js";
import { IronicClient, type IronicNode } from "../ironic/client.js";
import { toBridgeNodes } from "../ironic/sync.js";
import { ironicAuthFromEnv } from "../ironic/keystone.js";
import { ConfigError } from "../config.js";
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
    httpUrlFlag("bridge", values.bridge!, "SHARDBRIDGE_URL"),
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
export async function syncFromIronic(
  bridge: BridgeClient,
  readIronic: () => Promise<IronicNode[]>,
): Promise<{ nodes: number; created: number; updated: number }> {
  // The definitions' version before Ironic is read: if it moves before a write, a
  // migration may have written newer shard keys than this sync read (see below).
  const { version } = await bridge.shardDefinitions();
  // Ironic knows a node's instance but not its host: keep the host the bridge was told.
  const instanceHost = new Map((await bridge.allNodes()).map((n) => [n.uuid, n.instance_host]));
  const nodes = toBridgeNodes(await readIronic(), instanceHost);
  let created = 0;
  let updated = 0;
  for (let i = 0; i < nodes.length; i += BULK_MAX_NODES) {
    // `migrate apply` writes its keys to Ironic, then changes the shard definitions, then
    // writes the bridge: a sync that read Ironic before those keys must not write its older
    // ones over the bridge's. Its definitions version moved meanwhile: stop, write no more.
    if ((await bridge.shardDefinitions()).version !== version)
      throw new Error(
        `shard definitions changed while this sync read Ironic (a migration may be under way): ` +
          `${i} of ${nodes.length} nodes written, the rest not; run ironic-sync again`,
      );
    const answer = await bridge.bulkUpsert(nodes.slice(i, i + BULK_MAX_NODES));
    created += answer.created;
    updated += answer.updated;
  }
  return { nodes: nodes.length, created, updated };
}
