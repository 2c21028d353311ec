import { z } from "zod";

/** One problem with one input field: where it is and why it was refused. */
export interface FieldIssue {
  field: string;
  reason: string;
}

/**
 * Raised before any I/O when an input breaks a rule. It carries every offending
 * field so an HTTP layer can answer 4xx naming each one; nothing was written.
 */
export class ValidationError extends Error {
  readonly issues: FieldIssue[];
  constructor(issues: FieldIssue[]) {
    super(issues.map((i) => `${i.field}: ${i.reason}`).join("; "));
    this.name = "ValidationError";
    this.issues = issues;
  }
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
 * A zod refinement for the array `list`: `field` of each item must be unique; a repeat is
 * reported at `[index].field`, naming the first item that had it.
 */
export function uniqueField<T>(list: string, field: string, valueOf: (item: T) => string) {
  return (items: T[], ctx: z.RefinementCtx<T[]>): void => {
    const seen = new Map<string, number>();
    items.forEach((item, index) => {
      const value = valueOf(item);
      const first = seen.get(value);
      if (first !== undefined) {
        ctx.addIssue({ code: "custom", path: [index, field], message: `repeats ${list}[${first}].${field}` });
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
