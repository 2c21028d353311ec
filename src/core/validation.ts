import { z } from "zod";

/** One problem with one input field: where it is and why it was refused. */
export interface FieldIssue {
  field: string;
  reason: string;
}

/**
 * The most problems one refusal lists. A bulk of 20,000 nodes that each lack a field has
 * 20,000 of them: listed whole, the answer was 14–18 MB, built and written on the event
 * loop (190–240 ms that every renew waited behind). The first ones say what is wrong;
 * the rest are counted.
 */
export const MAX_LISTED_ISSUES = 50;

/**
 * Raised before any I/O when an input breaks a rule. It carries the offending fields (the
 * first MAX_LISTED_ISSUES, and how many more) so an HTTP layer can answer 4xx naming
 * each one; nothing was written.
 */
export class ValidationError extends Error {
  readonly issues: FieldIssue[];
  /** problems found past the listed ones: counted, not kept */
  readonly unlisted: number;
  constructor(issues: FieldIssue[], unlisted = 0) {
    const listed = issues.slice(0, MAX_LISTED_ISSUES);
    const more = unlisted + issues.length - listed.length;
    super(describeIssues(listed, more));
    this.name = "ValidationError";
    this.issues = listed;
    this.unlisted = more;
  }
}

/** Issues as one line of text: `field: reason; …`, and how many more were not listed. */
export function describeIssues(issues: readonly FieldIssue[], unlisted = 0): string {
  const listed = issues.map((i) => `${i.field}: ${i.reason}`).join("; ");
  return unlisted > 0 ? `${listed}; and ${unlisted} more` : listed;
}

function fieldPath(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return "(root)";
  return path
    .map((part, index) =>
      typeof part === "number" ? `[${part}]` : `${index === 0 ? "" : "."}${String(part)}`,
    )
    .join("");
}

/**
 * A zod check for the array `list` (`.check(uniqueField(...))`, placed after the array's
 * other checks): `field` of each item (the item itself when `field` is null) must be
 * unique; a repeat is reported at `[index].field` (`[index]`), naming the first item that
 * had it. Items whose value is null are not compared, and an array already refused for
 * other reasons is not looked at (its invalid items would all repeat one another).
 */
export function uniqueField<T>(list: string, field: string | null, valueOf: (item: T) => string | null) {
  return (payload: z.core.ParsePayload<T[]>): void => {
    if (payload.issues.length > 0) return;
    const seen = new Map<string, number>();
    payload.value.forEach((item, index) => {
      const value = valueOf(item);
      if (value === null) return;
      const first = seen.get(value);
      if (first !== undefined) {
        const [path, named] =
          field === null ? [[index], `${list}[${first}]`] : [[index, field], `${list}[${first}].${field}`];
        payload.issues.push({ code: "custom", path, message: `repeats ${named}`, input: item });
      }
      seen.set(value, index);
    });
  };
}

function issuesOf(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({ field: fieldPath(issue.path), reason: issue.message }));
}

/** Parse `input` with `schema` or throw a ValidationError listing each field and reason. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ValidationError(issuesOf(result.error));
}

/** How many keys a RepeatParse remembers before it starts over: a fleet's shards fit. */
const REMEMBERED_KEYS = 10_000;

type Primitive = string | number | boolean | bigint | null | undefined;
const isPrimitive = (value: unknown): value is Primitive =>
  value === null || (typeof value !== "object" && typeof value !== "function");

/**
 * A copy of `input`'s own enumerable fields, each read once, if it is a plain object of
 * primitives; else undefined. The copy is what is parsed, compared and remembered, so a
 * getter that answers differently each time, or a field zod would see but a comparison
 * would not (non-enumerable, inherited), cannot make the two disagree.
 */
function flatCopy(input: unknown): Record<string, Primitive> | undefined {
  if (typeof input !== "object" || input === null) return undefined;
  const prototype = Object.getPrototypeOf(input) as unknown;
  if (prototype !== Object.prototype && prototype !== null) return undefined;
  const copy = Object.create(null) as Record<string, Primitive>;
  for (const key of Object.keys(input)) {
    const value = (input as Record<string, unknown>)[key];
    if (!isPrimitive(value)) return undefined;
    copy[key] = value;
  }
  return copy;
}

/** The same fields with the same values (Object.is: -0 is not 0, NaN is NaN). */
function sameFields(seen: Record<string, Primitive>, input: Record<string, Primitive>): boolean {
  const keys = Object.keys(seen);
  if (Object.keys(input).length !== keys.length) return false;
  for (const key of keys) if (!(key in input) || !Object.is(input[key], seen[key])) return false;
  return true;
}

/**
 * parseOrThrow for a request its callers send again and again unchanged: an agent renews
 * its shard with the same agent, token and TTL every TTL/3, and a fleet's renews reach
 * the bridge thousands of times a second. zod's parse is cheap alone (0.5 µs a renew in a
 * tight loop) but not among the bridge's other work, where its shared checks run cold:
 * measured, 49 -> 43 µs of the bridge's CPU per renew without it. So the last input
 * accepted under each key (the field `keyField`, a shard) is remembered, and an input
 * equal to it field by field — a plain object of primitives, copied once and compared
 * with Object.is, so equal means the same to the schema — gets that parse's (frozen)
 * result again. Anything else, a new token or a field more or less, is parsed in full;
 * a refused input is never remembered.
 */
export class RepeatParse<S extends z.ZodType> {
  private readonly last = new Map<string, { fields: Record<string, Primitive>; parsed: z.output<S> }>();

  constructor(
    private readonly schema: S,
    private readonly keyField: string,
  ) {}

  parse(input: unknown): z.output<S> {
    const fields = flatCopy(input);
    const key = fields?.[this.keyField];
    if (fields === undefined || typeof key !== "string") return parseOrThrow(this.schema, input);
    const seen = this.last.get(key);
    if (seen !== undefined && sameFields(seen.fields, fields)) return seen.parsed;
    const parsed = Object.freeze(parseOrThrow(this.schema, fields)) as z.output<S>;
    if (this.last.size >= REMEMBERED_KEYS) this.last.clear();
    this.last.set(key, { fields, parsed });
    return parsed;
  }
}

/**
 * Parse two parts of one request (say the path and the body) and report the problems of
 * both at once, so a client fixes everything in one round.
 */
export function parseBoth<A extends z.ZodType, B extends z.ZodType>(
  first: [A, unknown],
  second: [B, unknown],
): [z.output<A>, z.output<B>] {
  const a = first[0].safeParse(first[1]);
  const b = second[0].safeParse(second[1]);
  if (a.success && b.success) return [a.data, b.data];
  throw new ValidationError([
    ...(a.success ? [] : issuesOf(a.error)),
    ...(b.success ? [] : issuesOf(b.error)),
  ]);
}
