import { spawnSync } from "node:child_process";
import { egressTable } from "../../src/agent/run/egress-fence.js";

/** Whether nftables has the table `table` (inet family). */
export const egressTableExists = (table: string): boolean =>
  spawnSync("nft", ["list", "table", "inet", table]).status === 0;

/**
 * The egress fence tables `run --egress-fence` made for `shard` on `agents`, removed where
 * a supervisor killed -9 left one (its element expired, its rule matching nothing): a test
 * leaves no state of its own behind.
 */
export function dropEgressTables(shard: string, agents: readonly string[]): void {
  for (const agent of agents) {
    const table = egressTable(shard, agent);
    if (egressTableExists(table)) spawnSync("nft", ["delete", "table", "inet", table]);
  }
}
