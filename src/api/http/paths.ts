import { z } from "zod";
import { ShardName } from "../../core/names.js";

/** The `{shard}` of a path, as every shard route checks it. */
export const ShardPath = z.strictObject({ shard: ShardName });
