import { expect } from "chai";
import { deliveryIdOf, dueInspections, nextReadFrom } from "../../src/bridge/inspection/watcher.js";

describe("Inspection watcher: which inspections are due (pure)", () => {
  const a = { uuid: "aaaaaaaa-0000-4000-8000-000000000001", finishedAt: "2026-11-30T05:00:02.000001+00:00" };
  const b = { uuid: "bbbbbbbb-0000-4000-8000-000000000002", finishedAt: "2026-11-30T05:00:01.500000+00:00" };
  const c = { uuid: "cccccccc-0000-4000-8000-000000000003", finishedAt: "2026-11-30T04:59:00+00:00" };

  it("answers every inspection not handled yet, oldest first", () => {
    expect(dueInspections([a, b, c], new Map())).to.deep.equal([c, b, a]);
  });

  it("leaves out what was handled, and brings a node back when it finished a newer inspection", () => {
    const handled = new Map([
      [a.uuid, a.finishedAt],
      [b.uuid, "2026-11-29T00:00:00+00:00"],
    ]);
    expect(dueInspections([a, b, c], handled)).to.deep.equal([c, b]);
  });

  it("names a delivery by node and finish time, so every attempt at one inspection is the same delivery", () => {
    expect(deliveryIdOf(a)).to.equal(`ironic-inspection.${a.uuid}.${Date.parse(a.finishedAt)}`);
    expect(deliveryIdOf(a)).to.match(/^[A-Za-z0-9._:-]{1,128}$/);
    expect(deliveryIdOf({ ...a, finishedAt: "2026-11-30T05:00:03+00:00" })).to.not.equal(deliveryIdOf(a));
  });

  describe("where the next poll reads from (pure)", () => {
    const at = (iso: string) => Date.parse(iso);
    const LOOKBACK = 120_000;

    it("nothing inspected yet: from the beginning again; nothing new: where it was", () => {
      expect(nextReadFrom([], [], null, LOOKBACK)).to.equal(null);
      expect(nextReadFrom([], [], at(c.finishedAt), LOOKBACK)).to.equal(at(c.finishedAt));
    });

    it("the lookback before the newest inspection read", () => {
      expect(nextReadFrom([a, b, c], [], null, LOOKBACK)).to.equal(at(a.finishedAt) - LOOKBACK);
    });

    it("never moves back: a window already past the lookback stays", () => {
      const previous = at(a.finishedAt) - 1000;
      expect(nextReadFrom([a], [], previous, LOOKBACK)).to.equal(previous);
    });

    it("an inspection to try again holds the window open at its time, however old", () => {
      const old = { uuid: c.uuid, finishedAt: "2026-11-30T04:00:00+00:00" };
      expect(nextReadFrom([a, b, old], [old], null, LOOKBACK)).to.equal(at(old.finishedAt));
      // one inside the lookback already is read again anyway
      expect(nextReadFrom([a, b], [b], null, LOOKBACK)).to.equal(at(a.finishedAt) - LOOKBACK);
    });
  });
});
