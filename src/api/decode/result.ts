import { ValidationError, type FieldIssue } from "../../core/validation.js";
import { asBodyObject } from "../http/body.js";

/**
 * What decoding a request body gives: the value, the fields at fault (a 400 naming each),
 * or why it is not JSON at all. Plain data, so it crosses to and from a worker thread.
 */
export type Decoded<T> =
  | { ok: true; value: T }
  | { ok: false; issues: FieldIssue[]; unlisted: number }
  | { ok: false; malformed: string };

/**
 * Decode `text` as a JSON object and hand it to `decode`: an empty body is a missing one,
 * text that is not JSON is malformed, and a ValidationError `decode` throws becomes the
 * fields at fault.
 */
export function decodeObject<T>(text: string, decode: (body: Record<string, unknown>) => T): Decoded<T> {
  let raw: unknown;
  try {
    raw = text === "" ? undefined : JSON.parse(text);
  } catch (error) {
    return { ok: false, malformed: (error as Error).message };
  }
  try {
    return { ok: true, value: decode(asBodyObject(raw)) };
  } catch (error) {
    if (error instanceof ValidationError)
      return { ok: false, issues: error.issues, unlisted: error.unlisted };
    throw error;
  }
}
