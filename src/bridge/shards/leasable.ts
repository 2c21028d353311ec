import { ShardName, ShardTwinError } from "../../core/names.js";
import type { ShardCatalog } from "./catalog.js";

/**
 * Whether an agent may be granted a new lease on `shard`: a definition names it, a node
 * carries it as its shard key (shard keys come from Ironic; nobody has to define them
 * again here), or the bridge leases any valid name (serve --allow-undefined-shards).
 * Anything else is most likely a typo, and its lease would leave the name listed in
 * GET /v1/shards for good. A name the grammar refuses is left to the store's parse, which
 * answers it the same way on every route. Throws ShardTwinError, whatever the bridge
 * allows, when a shard equal to `shard` but for case is defined: one shard to nova (its
 * host would be `RACK-X-ironic` beside `rack-x-ironic`) and to Ironic's database.
 */
export async function mayLease(
  catalog: ShardCatalog,
  nodes: { countOf(shard: string): Promise<number> },
  shard: string,
): Promise<boolean> {
  const twin = catalog.twinOf(shard);
  if (twin !== null) throw new ShardTwinError(shard, twin.name, twin.source);
  if (catalog.allowUndefined || catalog.get(shard) !== undefined) return true;
  if (!ShardName.safeParse(shard).success) return true;
  return (await nodes.countOf(shard)) > 0;
}
