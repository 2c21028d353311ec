import { parseArgs } from "node:util";
import { z } from "zod";
import { MemberList, RingKindName, parseUuidLines } from "../core/ring/kinds.js";
import { buildRing } from "../core/ring/legacy.js";
import { NOVA_PARTITIONS, ToozRing } from "../core/ring/tooz.js";
import { integerFlag, readStdin, flagsOrThrow } from "./io.js";
import { ConfigError } from "../runtime/config.js";

export const RING_USAGE = `  ring     map node UUIDs (stdin, one a line) onto members as nova's ring does; prints {"node": "member"}
             --members a,b,c   the compute hosts in the ring (lower-cased, as nova does)
             --kind K          tooz (nova's, default) or ketama (the hashring package, for comparison)
             --partitions N    points per member (tooz; nova uses 32)
             --replicas N      members per node (tooz; prints a sorted list per node when > 1)
             --ignore x,y      members to skip (tooz's ignore_nodes)
`;

/** `shardbridge ring`: the same answer tooz gives, so anyone can hold one against the other. */
export async function ringCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      members: { type: "string" },
      kind: { type: "string", default: "tooz" },
      partitions: { type: "string" },
      replicas: { type: "string" },
      ignore: { type: "string" },
    },
  });
  const { members, kind } = flagsOrThrow(z.strictObject({ members: MemberList, kind: RingKindName }), {
    members: values.members ?? "",
    kind: values.kind,
  });
  const partitions = integerFlag("partitions", values.partitions, 1, 1024);
  const replicas = integerFlag("replicas", values.replicas, 1, 1000) ?? 1;
  const ignore = (values.ignore ?? "")
    .split(",")
    .filter((m) => m !== "")
    .map((m) => m.toLowerCase());
  if (kind === "ketama" && (partitions !== undefined || replicas !== 1 || ignore.length > 0))
    throw new ConfigError("--partitions, --replicas and --ignore are tooz's; ketama takes none of them");
  const nodes = parseUuidLines(await readStdin());
  const out: Record<string, string | string[] | null> = {};
  if (kind === "ketama") {
    const ring = buildRing("ketama", members);
    for (const node of nodes) out[node] = ring.memberOf(node);
  } else {
    const ring = new ToozRing(
      members.map((m) => m.toLowerCase()),
      partitions ?? NOVA_PARTITIONS,
    );
    for (const node of nodes) {
      const found = ring.lookup(node, { ignore, replicas });
      out[node] = replicas === 1 ? (found[0] ?? null) : found.sort();
    }
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}
