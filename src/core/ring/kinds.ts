import { z } from "zod";
import { AgentId } from "../names.js";
import { NodeUuid } from "../node.js";
import { ValidationError } from "../validation.js";

/** The rings shardbridge can reproduce: nova's (tooz) and, for comparison only, ketama. */
export const RING_KINDS = ["tooz", "ketama"] as const;
export type RingKind = (typeof RING_KINDS)[number];

/** A ring over compute hosts that places a node by its UUID. */
export interface LegacyRing {
  readonly kind: RingKind;
  readonly members: readonly string[];
  /** the member a node belongs to; null for an empty ring */
  memberOf(uuid: string): string | null;
}

/** A ring kind as a flag or field gives it. */
export const RingKindName = z.enum(RING_KINDS, { error: "must be tooz or ketama" });

/**
 * Ring members: compute hosts (agent ids), at least one (nova always has its own host in
 * its ring), each once. Nova lower-cases hosts, so two ids that differ only in case would
 * be one member: that is refused rather than silently merged.
 */
export const RingMembers = z
  .array(AgentId)
  .min(1, { error: "must name at least one member (nova's ring always holds its own host)" })
  .superRefine((members, ctx) => {
    const first = new Map<string, number>();
    members.forEach((member, index) => {
      const key = member.toLowerCase();
      const earlier = first.get(key);
      if (earlier !== undefined)
        ctx.addIssue({
          code: "custom",
          path: [index],
          message: `repeats [${earlier}] (hosts compare lower-cased, as in nova)`,
        });
      else first.set(key, index);
    });
  });

/** `--members a,b,c` as typed on a command line. */
export const MemberList = z
  .string({ error: "must be a comma-separated list of agent ids" })
  .transform((list) => (list.trim() === "" ? [] : list.split(",").map((m) => m.trim())))
  .pipe(RingMembers);

/**
 * Node UUIDs, one a line (blank lines skipped), as `shardbridge ring` reads them on stdin.
 * A bad line is named by its number; a UUID given twice is one node.
 */
export function parseUuidLines(text: string): string[] {
  const uuids: string[] = [];
  const issues: Array<{ field: string; reason: string }> = [];
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (line === "") return;
    const parsed = NodeUuid.safeParse(line);
    if (parsed.success) uuids.push(parsed.data);
    else
      issues.push({
        field: `line ${index + 1}`,
        reason: `${JSON.stringify(line.slice(0, 80))}: not a node UUID`,
      });
  });
  if (issues.length > 0) throw new ValidationError(issues.slice(0, 20));
  return [...new Set(uuids)];
}
