/**
 * The bodies the fence reads to judge a write (a new port's node, a patch's paths), and
 * what is sent on: the JSON as the fence read it, written again. Forwarding the caller's
 * own bytes would let a body mean one thing here and another to Ironic — Python's json
 * takes `NaN` and `Infinity` where JSON.parse refuses them, so a patch the fence could not
 * read would pass unjudged. A body that is not plain JSON of the expected shape is refused.
 *
 * Pure: bytes in, a verdict out.
 */

/** One operation of a JSON patch (RFC 6902), as Ironic takes them. */
export interface PatchOp {
  op: string;
  path: string;
  from?: unknown;
  value?: unknown;
}

export type Judged<T> = { ok: true; read: T; bytes: Buffer } | { ok: false; reason: string };

function parsed(raw: Buffer): { ok: true; json: unknown } | { ok: false } {
  try {
    return { ok: true, json: JSON.parse(raw.toString("utf8")) };
  } catch {
    return { ok: false };
  }
}

/** A JSON patch: an array of operations, each with its `op` and `path` as strings. */
export function judgedPatch(raw: Buffer): Judged<PatchOp[]> {
  const body = parsed(raw);
  if (!body.ok || !Array.isArray(body.json))
    return { ok: false, reason: "a patch the fence judges must be a JSON array of operations (RFC 6902)" };
  for (const op of body.json as unknown[])
    if (
      typeof op !== "object" ||
      op === null ||
      typeof (op as PatchOp).op !== "string" ||
      typeof (op as PatchOp).path !== "string"
    )
      return { ok: false, reason: 'each operation of a patch is an object with "op" and "path" strings' };
  return { ok: true, read: body.json as PatchOp[], bytes: Buffer.from(JSON.stringify(body.json)) };
}

/** A JSON object (a new entry's fields). */
export function judgedObject(raw: Buffer): Judged<Record<string, unknown>> {
  const body = parsed(raw);
  if (!body.ok || typeof body.json !== "object" || body.json === null || Array.isArray(body.json))
    return { ok: false, reason: "a new entry's body must be a JSON object" };
  return {
    ok: true,
    read: body.json as Record<string, unknown>,
    bytes: Buffer.from(JSON.stringify(body.json)),
  };
}

/**
 * The operations that change `field` or what is below it: a path or a move's or copy's
 * `from` of `/field` or `/field/…`, or of the whole document ("").
 */
export function touching(ops: readonly PatchOp[], field: string): PatchOp[] {
  const touches = (pointer: unknown) =>
    typeof pointer === "string" &&
    (pointer === "" || pointer === `/${field}` || pointer.startsWith(`/${field}/`));
  return ops.filter((op) => touches(op.path) || touches(op.from));
}
