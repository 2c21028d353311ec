import { z } from "zod";

/*
 * Pieces many answers share. Answers are strict objects (additionalProperties false in the
 * OpenAPI document): a field added to an answer without a word in its contract fails the
 * contract test rather than go undocumented.
 */

/** A count, a length of time in ms, a generation: a whole number from 0. */
export const wholeNumber = z.int().min(0);

/** An instant as the bridge writes it: `Date.prototype.toISOString`, UTC. */
export const time = z.iso.datetime();
