import { isShardUndefined } from "./bridge-client.js";
import { standbyJitter } from "../core/keeper/machine.js";

/** The first wait after the bridge says it does not know the shard, and the longest (ms). */
export const UNDEFINED_FIRST_WAIT_MS = 500;
export const UNDEFINED_MAX_WAIT_MS = 5000;

/**
 * How an agent takes 404 shardbridge.shard.undefined. For a shard the bridge never
 * answered for, it is a mistake that retrying will not mend (a typo): the agent stops
 * (exit 2). For a shard it did answer for — the agent stood by or was active, or `run`
 * checked it at start — it is a state that passes: the store came back without the
 * shard's definition and no bridge has given it back yet (docs/OPERATIONS.md). The agent
 * stays up, stands by, says so once, and asks again at waits that double from
 * UNDEFINED_FIRST_WAIT_MS to UNDEFINED_MAX_WAIT_MS, until the definition is back.
 */
export class UndefinedShard {
  /** acquires refused so in a row */
  private refusals = 0;

  constructor(
    /** whether the bridge answered for the shard before this agent started (run checks it) */
    private served = false,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * The bridge answered for the shard (a grant, or a refusal saying who holds it): true
   * when it did not know it just before, so that the agent says it is back.
   */
  answered(): boolean {
    this.served = true;
    const wasUndefined = this.refusals > 0;
    this.refusals = 0;
    return wasUndefined;
  }

  /** The wait before the next acquire after one that failed with `cause`; undefined: a standby's poll. */
  retryAfterMs(cause: unknown): number | undefined {
    if (!isShardUndefined(cause) || !this.served) return undefined;
    this.refusals++;
    const wait = Math.min(UNDEFINED_MAX_WAIT_MS, UNDEFINED_FIRST_WAIT_MS * 2 ** (this.refusals - 1));
    return standbyJitter(wait, this.random());
  }

  /**
   * What a failure with `cause` means: a mistake to stop on, the first refusal of a run
   * (to say), a later one (said already), or no refusal of this kind (null).
   */
  verdict(cause: unknown): "fatal" | "first" | "again" | null {
    if (!isShardUndefined(cause)) return null;
    if (!this.served) return "fatal";
    return this.refusals <= 1 ? "first" : "again";
  }
}
