import { expect } from "chai";
import { BridgeError } from "../../src/agent/bridge-client.js";
import {
  UNDEFINED_FIRST_WAIT_MS,
  UNDEFINED_MAX_WAIT_MS,
  UndefinedShard,
} from "../../src/agent/undefined-shard.js";

const undefinedShard = new BridgeError(404, "shardbridge.shard.undefined", "shard rack-x is not defined");
const unreachable = new TypeError("fetch failed");

/** 404 shard.undefined: fatal for a shard the bridge never answered for, a passing state for one it did. */
describe("An agent's shard the bridge does not know (UndefinedShard)", () => {
  it("a shard never answered for: a mistake to stop on, no back-off", () => {
    const shard = new UndefinedShard();
    expect(shard.retryAfterMs(undefinedShard)).to.equal(undefined);
    expect(shard.verdict(undefinedShard)).to.equal("fatal");
    expect(shard.verdict(unreachable)).to.equal(null);
  });

  it("a shard it served: said once, then waits that double up to the most, reset once answered", () => {
    // random 1: the top of the jitter, so the waits read plainly
    const shard = new UndefinedShard(false, () => 0.999999);
    shard.answered();
    const waits: number[] = [];
    const verdicts: Array<string | null> = [];
    for (let i = 0; i < 7; i++) {
      waits.push(Math.round(shard.retryAfterMs(undefinedShard)!));
      verdicts.push(shard.verdict(undefinedShard));
    }
    expect(waits).to.deep.equal([500, 1000, 2000, 4000, 5000, 5000, 5000]);
    expect(waits[0]).to.equal(UNDEFINED_FIRST_WAIT_MS);
    expect(Math.max(...waits)).to.equal(UNDEFINED_MAX_WAIT_MS);
    expect(verdicts).to.deep.equal(["first", "again", "again", "again", "again", "again", "again"]);
    // Another failure (the bridge away) keeps the standby's own poll.
    expect(shard.retryAfterMs(unreachable)).to.equal(undefined);
    expect(shard.answered(), "back after being undefined").to.equal(true);
    expect(shard.answered()).to.equal(false);
    expect(Math.round(shard.retryAfterMs(undefinedShard)!)).to.equal(500);
    expect(shard.verdict(undefinedShard)).to.equal("first");
  });

  it("`run` checked the shard at start: served from the first refusal on", () => {
    const shard = new UndefinedShard(true, () => 0);
    // random 0: the bottom of the jitter, half the wait
    expect(shard.retryAfterMs(undefinedShard)).to.equal(250);
    expect(shard.verdict(undefinedShard)).to.equal("first");
  });
});
