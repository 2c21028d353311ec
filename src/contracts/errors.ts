import { z } from "zod";
import { wholeNumber } from "./fields.js";
import { Lease } from "./leases.js";

/** A validation error names the field it is about (the document says so with if/then). */
export const VALIDATION_CODE = "shardbridge.validation";

/** One error in the OpenStack API-SIG shape; a validation error names its field. */
export const ApiError = z
  .strictObject({
    status: z.int().min(400).max(599),
    code: z.string().regex(/^shardbridge\./),
    title: z.string(),
    detail: z.string(),
    /** the request field at fault, for validation errors */
    field: z.string().optional(),
    /** for a refused lease: the live lease in the way, so a client need not parse `detail` */
    lease: Lease.nullable().optional(),
    /** for a refused lease: when asking again can succeed */
    retry_after_ms: wholeNumber.optional(),
    /** an acquire that waited: how long (see LeaseWaits) */
    waited_ms: wholeNumber.optional(),
  })
  .refine((error) => error.code !== VALIDATION_CODE || error.field !== undefined, {
    error: "a validation error names its field",
    path: ["field"],
  });
export type ApiError = z.infer<typeof ApiError>;

/** What JSON Schema says of ApiError that zod says with its refinement. */
export const API_ERROR_RULE = {
  if: { type: "object", properties: { code: { const: VALIDATION_CODE } } },
  then: { type: "object", properties: { field: { type: "string" } }, required: ["field"] },
};

/** Every refusal: `{"errors":[…]}`, the first error's status the answer's (component `Error`). */
export const ErrorBody = z.strictObject({ errors: z.array(ApiError).min(1) });
export type ErrorBody = z.infer<typeof ErrorBody>;
