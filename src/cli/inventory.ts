import { readFileSync } from "node:fs";
import { BridgeClient } from "../agent/bridge-client.js";
import { InventoryFile } from "../core/node.js";
import { parseOrThrow } from "../core/validation.js";
import { IronicClient } from "../upstream/ironic-client.js";
import { ironicAuthFromEnv } from "../upstream/keystone.js";
import { randomUuid, seededRandom } from "../runtime/random.js";
import type { PlanNode } from "../core/ring/plan.js";
import { httpUrlFlag, integerFlag, tokenFlag } from "./io.js";
import { ConfigError } from "../runtime/config.js";

/** The flags that say where an inventory comes from; exactly one source. */
export const INVENTORY_OPTIONS = {
  inventory: { type: "string" },
  bridge: { type: "string" },
  token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
  ironic: { type: "string" },
  generate: { type: "string" },
  seed: { type: "string", default: "1" },
} as const;

export const INVENTORY_USAGE = `             inventory, one of:
               --inventory FILE   {"nodes":[{"uuid","shard"?,"instance_host"?,…}]} (the bulk body; fields may be left out)
               --bridge URL       the live registry (with --token, an admin token; env SHARDBRIDGE_TOKEN)
               --ironic URL       Ironic's nodes (API 1.82); a node with an instance has no known host
               --generate N       N unsharded nodes with random UUIDs (--seed S, default 1)
`;

export interface InventorySource {
  nodes: PlanNode[];
  /** where --apply writes, if anywhere */
  writable: { kind: "bridge"; client: BridgeClient } | { kind: "ironic"; client: IronicClient } | null;
  describe: string;
}

export async function loadInventory(values: {
  inventory?: string | undefined;
  bridge?: string | undefined;
  token?: string | undefined;
  ironic?: string | undefined;
  generate?: string | undefined;
  seed?: string | undefined;
}): Promise<InventorySource> {
  const given = (["inventory", "bridge", "ironic", "generate"] as const).filter(
    (k) => values[k] !== undefined,
  );
  if (given.length !== 1)
    throw new ConfigError(
      `name one inventory: --inventory FILE, --bridge URL, --ironic URL or --generate N (got ${given.length})`,
    );
  if (values.inventory !== undefined) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(values.inventory, "utf8"));
    } catch (error) {
      throw new Error(`${values.inventory}: ${(error as Error).message}`);
    }
    const { nodes } = parseOrThrow(InventoryFile, raw);
    return { nodes, writable: null, describe: values.inventory };
  }
  if (values.bridge !== undefined) {
    if (values.token === undefined)
      throw new ConfigError("--bridge needs --token (an admin token) or SHARDBRIDGE_TOKEN");
    const client = new BridgeClient(httpUrlFlag("bridge", values.bridge), tokenFlag(values.token), 30_000);
    return { nodes: await client.allNodes(), writable: { kind: "bridge", client }, describe: values.bridge };
  }
  if (values.ironic !== undefined) {
    const client = new IronicClient(httpUrlFlag("ironic", values.ironic), ironicAuthFromEnv());
    const nodes = (await client.nodes()).map((n) => ({
      uuid: n.uuid,
      shard: n.shard,
      instance_host: null,
      has_instance: n.instance_uuid !== null,
    }));
    return { nodes, writable: { kind: "ironic", client }, describe: values.ironic };
  }
  const count = integerFlag("generate", values.generate, 1, 10_000_000)!;
  const random = seededRandom(integerFlag("seed", values.seed, 0, 2 ** 32 - 1)!);
  const nodes = Array.from({ length: count }, () => ({
    uuid: randomUuid(random),
    shard: null,
    instance_host: null,
  }));
  return { nodes, writable: null, describe: `${count} generated nodes` };
}
