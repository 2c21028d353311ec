import { ValidationError } from "../../core/validation.js";
import { HttpError } from "../http/errors.js";
import type { Decoded } from "./result.js";

/** The 400 for a body that did not decode: its fields at fault, or why it is not JSON. */
export function decodeFailure(decoded: Exclude<Decoded<unknown>, { ok: true }>): Error {
  if ("issues" in decoded) return new ValidationError(decoded.issues, decoded.unlisted);
  return new HttpError([
    { status: 400, code: "shardbridge.body.malformed", title: "Malformed JSON", detail: decoded.malformed },
  ]);
}
