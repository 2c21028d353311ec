import { expect } from "chai";
import { RenewRequest } from "../src/domain/lease.js";
import { RepeatParse, ValidationError } from "../src/domain/validation.js";

describe("RepeatParse: a request sent again unchanged is parsed once", () => {
  const renew = { shard: "s1", agent: "a", token: 7, ttlMs: 6_000 };

  it("answers an equal input with the remembered (frozen) result, and parses anything else afresh", () => {
    const parse = new RepeatParse(RenewRequest, "shard");
    const first = parse.parse({ ...renew });
    expect(Object.isFrozen(first)).to.equal(true);
    expect(parse.parse({ ...renew })).to.equal(first);
    const next = parse.parse({ ...renew, token: 8 });
    expect(next).to.not.equal(first);
    expect(next).to.deep.equal({ ...renew, token: 8 });
    // each key remembers its own last input
    const other = parse.parse({ ...renew, shard: "s2" });
    expect(parse.parse({ ...renew, token: 8 })).to.equal(next);
    expect(parse.parse({ ...renew, shard: "s2" })).to.equal(other);
  });

  it("never remembers a refused input, nor one whose fields are not all primitives", () => {
    const parse = new RepeatParse(RenewRequest, "shard");
    for (let attempt = 0; attempt < 2; attempt++)
      expect(() => parse.parse({ ...renew, token: 0 })).to.throw(ValidationError, /token/);
    const boxed = { ...renew, token: { valueOf: () => 7 } };
    for (let attempt = 0; attempt < 2; attempt++)
      expect(() => parse.parse(boxed)).to.throw(ValidationError, /token/);
    // A class instance is not a plain record: parsed every time (zod reads its own fields).
    class Renew {
      shard = "s1";
      agent = "a";
      token = 7;
    }
    const instance = parse.parse(new Renew());
    expect(parse.parse(new Renew())).to.not.equal(instance);
  });
});
