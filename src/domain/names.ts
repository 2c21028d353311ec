import { z } from "zod";

/**
 * The one grammar of names (docs/API.md, "Names"): every route, config file and command
 * reads shard names and agent ids with these two schemas.
 *
 * Shard names follow nova's rule for `[ironic] shard`: a safe charset, at most 255 chars.
 */
export const SHARD_NAME_PATTERN = /^[a-zA-Z0-9_.-]{1,255}$/;

/** A name a URL cannot carry as a path segment: `.` and `..` are dot-segments any client may resolve away. */
const onlyDots = (name: string): boolean => /^\.+$/.test(name);

export const ShardName = z
  .string({ error: "must be a string" })
  .regex(SHARD_NAME_PATTERN, { error: "must match ^[a-zA-Z0-9_.-]{1,255}$" })
  // Ironic lists unsharded nodes under the shard name "None"; a real shard of that name
  // would be indistinguishable from them.
  .refine((name) => name !== "None", { error: 'must not be "None": that names the unsharded nodes' })
  // curl, browsers and the project's own CLI normalise "/v1/shards/../lease" to another path.
  .refine((name) => !onlyDots(name), { error: "must not be dots only: a URL cannot carry it" });

/**
 * Characters an agent id may not hold: control characters (they end up in logs and Redis
 * keys), format characters (bidi overrides that show an id reversed, zero-width joiners and
 * spaces, the BOM: two ids that look alike but differ), line and paragraph separators, and
 * the path separators `/` and `\` (an id travels as one segment of a URL).
 */
const UNFIT_IN_AGENT_ID = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}/\\]/u;

/**
 * An agent id is the nova-compute `host`: printable text, 1..255 chars, in Unicode's NFC
 * (the composed form: "é" one way only), with no space at either end and none of
 * UNFIT_IN_AGENT_ID. nova's hash ring lower-cases hosts, so ids equal but for case are one
 * member to nova: a file naming two such ids is refused (see `caseTwins`).
 */
export const AgentId = z
  .string({ error: "must be a string" })
  .min(1, { error: "must not be empty" })
  .max(255, { error: "must be at most 255 characters" })
  .refine((id) => !UNFIT_IN_AGENT_ID.test(id), {
    error:
      "must not contain control or format characters (bidi overrides, zero-width, BOM), line breaks, / or \\",
  })
  .refine((id) => id === id.trim(), { error: "must not begin or end with white space" })
  .refine((id) => id === id.normalize("NFC"), {
    error: "must be in Unicode's composed form (NFC): the same text written another way is another id",
  })
  .refine((id) => !onlyDots(id), { error: "must not be dots only: a URL cannot carry it" });

/**
 * A zod check for a list of agent ids (`.check(noCaseTwins(...))`, after its other checks):
 * two ids equal but for case are refused, both named. `idOf` picks the id of an item
 * (null: the item names none); `list` and `field` say where, as the refusal names it.
 */
export function noCaseTwins<T>(list: string, field: string | null, idOf: (item: T) => string | null) {
  return (payload: z.core.ParsePayload<T[]>): void => {
    if (payload.issues.length > 0) return;
    const ids = payload.value.map(idOf);
    const present = ids.flatMap((id, index) => (id === null ? [] : [{ id, index }]));
    for (const { index, twinOf } of caseTwins(present.map((p) => p.id))) {
      const [at, earlier] = [present[index]!, present[twinOf]!];
      const where = (i: number) => `${list}[${i}]${field === null ? "" : `.${field}`}`;
      payload.issues.push({
        code: "custom",
        path: field === null ? [at.index] : [at.index, field],
        message: `${JSON.stringify(at.id)} and ${where(earlier.index)} ${JSON.stringify(earlier.id)} are one host to nova (it compares hosts lower-cased): name it one way`,
        input: payload.value[at.index],
      });
    }
  };
}

/** What nova's hash ring compares hosts by (it lower-cases them): two ids with one key are one host. */
export const hostKey = (id: string): string => id.toLowerCase();

/**
 * A heartbeat refused because another registered agent is the same host to nova (its id
 * equal but for case): both would be one ring member, each handed the other's nodes.
 */
export class HostTwinError extends Error {
  constructor(
    readonly agent: string,
    readonly registered: string,
  ) {
    super(
      `agent ${agent} is one host to nova with registered agent ${registered} (nova compares hosts lower-cased): ` +
        `act as ${registered}, or forget it first (DELETE /v1/agents/${registered})`,
    );
    this.name = "HostTwinError";
  }
}

/**
 * The agent ids of `ids` that equal an earlier one but for case — one member to nova's
 * ring, which lower-cases hosts — as pairs, each the later's index and the earlier's. Pure.
 */
export function caseTwins(ids: readonly string[]): Array<{ index: number; twinOf: number }> {
  const first = new Map<string, number>();
  const twins: Array<{ index: number; twinOf: number }> = [];
  ids.forEach((id, index) => {
    const key = hostKey(id);
    const earlier = first.get(key);
    if (earlier !== undefined && ids[earlier] !== id) twins.push({ index, twinOf: earlier });
    if (earlier === undefined) first.set(key, index);
  });
  return twins;
}

/** The most shards one agent may say it serves (a heartbeat's `shards`). */
export const MAX_SERVED_SHARDS = 1000;

/**
 * The shards an agent says it serves, each a shard name. The bound is checked before any
 * name: a longer list is refused in one step, not name by name.
 */
export const ServedShards = z
  .array(ShardName)
  .max(MAX_SERVED_SHARDS, { error: `must name at most ${MAX_SERVED_SHARDS} shards` });

export type ShardName = z.infer<typeof ShardName>;
export type AgentId = z.infer<typeof AgentId>;

/**
 * nova's `[DEFAULT] host` for the nova-compute that serves `shard`, unless told otherwise:
 * synthetic and the same wherever the shard's active runs (nova's ironic-shards spec:
 * "a synthetic `[DEFAULT]host` value that matches the shard key"). `shardbridge run`
 * gives it to its child; `migrate plan` prints it.
 */
export const novaHostFor = (shard: string): string => `${shard}-ironic`;
