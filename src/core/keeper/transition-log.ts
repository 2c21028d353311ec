import type { Logger } from "winston";
import { z } from "zod";

/**
 * The lines an agent writes when its lease changes hands: the contract between the
 * reference agent, which writes them, and whoever reads its log to see when it acted
 * (`shardbridge chaos`, the tests). One schema for both sides, so a renamed message or
 * field fails a parse instead of silently matching nothing.
 */
const context = { timestamp: z.string(), agent: z.string(), shard: z.string() };

export const TransitionLine = z.discriminatedUnion("message", [
  /** the agent holds the lease and acts under `token` from now on */
  z.object({ ...context, message: z.literal("active"), token: z.number(), ttl_ms: z.number() }),
  /** it stopped acting: the store refused a renew, or the renew deadline passed */
  z.object({
    ...context,
    message: z.literal("lost"),
    token: z.number(),
    reason: z.enum(["refused", "deadline"]),
    detail: z.string(),
  }),
  /** it handed the lease back (on stop) */
  z.object({ ...context, message: z.literal("released"), token: z.number() }),
]);
export type TransitionLine = z.infer<typeof TransitionLine>;

/** What the agent passes; the logger adds the time and its agent and shard. */
export type LoggedTransition = TransitionLine extends infer L
  ? L extends TransitionLine
    ? Omit<L, "timestamp" | "agent" | "shard">
    : never
  : never;

/** Write a transition through an agent's logger (one made with `{ agent, shard }`). */
export function logTransition(log: Logger, transition: LoggedTransition): void {
  const { message, ...fields } = transition;
  if (message === "lost") log.warn(message, fields);
  else log.info(message, fields);
}

/** One log line as a transition, or null when it is not one (other lines, partial writes). */
export function parseTransition(line: string): TransitionLine | null {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return null;
  }
  const parsed = TransitionLine.safeParse(json);
  return parsed.success ? parsed.data : null;
}

/** Whether the agent acts from this transition on (true) or stops (false). */
export const actsAfter = (line: TransitionLine): boolean => line.message === "active";
