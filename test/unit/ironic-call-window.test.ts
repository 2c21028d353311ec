import { expect } from "chai";
import { callsAllowed, nextWindow } from "../../src/bridge/ironic/delivery-policy.js";

/** The window after each of `answers` (true: answered, false: left unanswered), from `window`. */
function windows(window: number, max: number, answers: boolean[]): number[] {
  return answers.map((answered) => (window = nextWindow(window, max, answered)));
}

/**
 * How many Ironic calls a bridge keeps in flight (src/bridge/ironic/delivery-policy.ts): the
 * rule alone. What it is for, an Ironic too slow to answer --ironic-concurrency calls at
 * once within their timeout, is test/openstack/ironic-durable.test.ts's under a CPU hog.
 */
describe("The window of Ironic calls in flight", () => {
  it("halves with each call left unanswered, down to one call", () => {
    const after = windows(8, 8, [false, false, false, false, false]);
    expect(after.map(callsAllowed)).to.deep.equal([4, 2, 1, 1, 1]);
  });

  it("grows back with answers, about one call more per window's worth of them, and never past the concurrency", () => {
    const after = windows(1, 8, Array<boolean>(40).fill(true)).map(callsAllowed);
    // The answer at which each count of calls is first allowed (1-based).
    const firstAt = (calls: number) => after.indexOf(calls) + 1;
    expect([2, 3, 4, 5, 6, 7, 8].map(firstAt)).to.deep.equal([1, 4, 7, 12, 17, 23, 31]);
    expect(Math.max(...after)).to.equal(8);
    expect(after.slice(30).every((calls) => calls === 8)).to.equal(true);
  });

  it("keeps a concurrency of one at one, answered or not", () => {
    expect(windows(1, 1, [true, false, true, true]).map(callsAllowed)).to.deep.equal([1, 1, 1, 1]);
  });

  it("after a cut, grows from where it was cut to, not from the concurrency", () => {
    const after = windows(8, 8, [false, true, true, true, true, true]).map(callsAllowed);
    expect(after).to.deep.equal([4, 4, 4, 4, 4, 5]);
  });
});
