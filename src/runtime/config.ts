import { readFileSync } from "node:fs";
import type { z } from "zod";
import { ValidationError, parseOrThrow } from "../core/validation.js";

/**
 * Bad usage or configuration: a flag, a missing setting, a config file that does not
 * parse — the operator's to fix, not a failure of the work. Commands exit 2 on it.
 */
export class ConfigError extends Error {}

/**
 * A JSON document's text without the UTF-8 byte order mark an editor may save before it
 * (Notepad, PowerShell's Out-File): it is no part of the document, and JSON.parse refuses it.
 */
export const withoutBom = (text: string): string => (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);

/**
 * Parse a JSON config document with `schema`; every error names `source` (a file, or
 * an environment variable) and, for a bad value, the field and the reason.
 */
export function parseJsonConfig<S extends z.ZodType>(text: string, schema: S, source: string): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(withoutBom(text));
  } catch (error) {
    throw new ConfigError(`${source}: not valid JSON: ${(error as Error).message}`);
  }
  try {
    return parseOrThrow(schema, raw);
  } catch (error) {
    if (error instanceof ValidationError) throw new ConfigError(`${source}: ${error.message}`);
    throw error;
  }
}

/** Read and parse a JSON config file; errors name `source` (default: the path). */
export function readJsonConfig<S extends z.ZodType>(path: string, schema: S, source = path): z.output<S> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(`${source}: ${(error as Error).message}`);
  }
  return parseJsonConfig(text, schema, source);
}
