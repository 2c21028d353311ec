import { isIP } from "node:net";
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
 * What nova and Ironic's database compare shard names by: case-blind. nova lower-cases
 * its hosts (`run` derives one from the shard: `rack-x-ironic`, `RACK-X-ironic`), and
 * Ironic's `shard` column in MySQL's default collation matches either spelling for the
 * other (`GET /v1/nodes?shard=rack-x` lists `RACK-X`'s nodes too). Two names with one key
 * are one shard: only one may be defined or leased. Shard names are ASCII, so this is
 * ASCII's lower-casing.
 */
export const shardKey = (shard: string): string => shard.toLowerCase();

/**
 * A shard refused because a shard equal to it but for case is defined (`twin`, from a
 * file of this bridge or the store): nova and Ironic would take the two for one.
 */
export class ShardTwinError extends Error {
  constructor(
    readonly shard: string,
    readonly twin: string,
    readonly source: "file" | "store",
  ) {
    super(
      `shard ${shard} and defined shard ${twin} (${source === "file" ? `shards/${twin}.json` : "stored"}) are one shard ` +
        `to nova and to Ironic's database, which compare shard names without case: name it ${twin}` +
        (source === "store"
          ? `, or remove that definition first (DELETE /v1/shard-definitions/${twin})`
          : ""),
    );
    this.name = "ShardTwinError";
  }
}

/** The longest host name DNS (and oslo.config's HostDomain, nova's `[DEFAULT] host`) takes. */
export const MAX_AGENT_ID_LENGTH = 253;

/** One dot-separated label of a host name, as oslo.config's HostDomain takes it: `_` allowed, no `-` at either end. */
const HOST_LABEL = /^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$/;
const HOST_CHARACTERS = /^[A-Za-z0-9._-]*$/;

/**
 * An IPv4 address in dotted quads or an IPv6 address, as oslo.config takes one: node's
 * test refuses what it refuses (leading zeros, "1.2.3"), but takes a zone ("fe80::1%eth0"),
 * which oslo.config does not.
 */
const isIpAddress = (id: string): boolean => isIP(id) !== 0 && !id.includes("%");

/** A character as a refusal names it: itself and its code point ("а" U+0430). */
const spelled = (char: string): string =>
  `${JSON.stringify(char)} U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;

/**
 * Why `id` is no host name nova-compute would take as its `[DEFAULT] host`, or null.
 * nova declares that option an oslo.config HostDomain: an IP address, or dot-separated
 * labels of ASCII letters, digits, `-` and `_` (1..63 each, no `-` at either end, the last
 * not all digits), 253 characters at most. Only ASCII, so no two ids can look alike
 * without being equal but for case (Cyrillic "а" for "a", U+2010 for "-", fullwidth
 * letters are all refused; case is nova's own comparison, see caseTwins). Stricter than
 * oslo.config in three places, each a host nova would hold as another string or fold
 * into an ASCII one: a trailing dot (oslo drops it), a trailing newline (Python's `$`
 * matches before one), and the four non-ASCII letters Python's case-blind `[A-Z]` also
 * matches (the Kelvin sign U+212A among them, which lower-cases to "k").
 */
export function hostNameProblem(id: string): string | null {
  if (id.length === 0) return "must not be empty";
  if (id.length > MAX_AGENT_ID_LENGTH)
    return `must be at most ${MAX_AGENT_ID_LENGTH} characters (a host name's limit)`;
  if (isIpAddress(id)) return null;
  if (id.includes(":"))
    return "must be an IP address (IPv6 without a zone: no %) or a host name, as nova's [DEFAULT] host is: it is neither";
  const odd = [...id].find((char) => !HOST_CHARACTERS.test(char));
  if (odd !== undefined)
    return (
      `must be a host name (ASCII letters, digits, "-" and "_", in labels separated by dots) or an IP address, ` +
      `as nova's [DEFAULT] host is: ${spelled(odd)} is not one of them`
    );
  const labels = id.split(".");
  if (labels.some((label) => label === ""))
    return "must not begin or end with a dot, nor hold two in a row: no label of a host name is empty";
  if (labels.some((label) => label.length > 63))
    return "must have no label (between dots) over 63 characters";
  if (labels.some((label) => !HOST_LABEL.test(label)))
    return 'must have no label that begins or ends with "-"';
  if (!/[A-Za-z-]/.test(labels.at(-1)!))
    return 'must end in a label with a letter or "-" (all digits there is no host name, nor an IP address)';
  return null;
}

/**
 * An agent id is a nova-compute `host` (`shardbridge run`'s `--id` and `--host`, a node's
 * `instance_host`): a host name or an IP address, as hostNameProblem says. nova's hash
 * ring lower-cases hosts, so ids equal but for case are one member to nova: a file naming
 * two such ids is refused (see `caseTwins`).
 */
export const AgentId = z
  .string({ error: "must be a string" })
  // The bounds first, for the OpenAPI document (JSON Schema cannot say the rest: the prose does).
  .min(1, { error: "must not be empty" })
  .max(MAX_AGENT_ID_LENGTH, {
    error: `must be at most ${MAX_AGENT_ID_LENGTH} characters (a host name's limit)`,
  })
  .check((payload) => {
    if (payload.issues.length > 0) return;
    const problem = hostNameProblem(payload.value);
    if (problem !== null) payload.issues.push({ code: "custom", message: problem, input: payload.value });
  });

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

/**
 * A heartbeat's `instance`: the name one process of an agent gives itself, the same in
 * each of its heartbeats, so that what several processes of one agent id declare adds up
 * (see LeaseBackend.heartbeat). Opaque; the reference client draws one at random.
 */
export const HeartbeatInstance = z
  .string({ error: "must be a string" })
  .regex(/^[A-Za-z0-9._:-]{1,64}$/, { error: "must be 1..64 of A-Z a-z 0-9 . _ : -" });

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
