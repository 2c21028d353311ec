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

/** Parse `input` with `schema` or throw a ValidationError listing each field and reason. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ValidationError(
    result.error.issues.map((issue) => ({ field: fieldPath(issue.path), reason: issue.message })),
  );
}
