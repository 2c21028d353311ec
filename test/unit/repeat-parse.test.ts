import { expect } from "chai";
import { RenewRequest } from "../../src/core/lease/bounds.js";
import { RepeatParse, ValidationError } from "../../src/core/validation.js";

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
    // A field that is an object (zod refuses it anyway) is never remembered either.
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

  it("reads each field once: a getter cannot make the remembered parse disagree with what was compared", () => {
    const parse = new RepeatParse(RenewRequest, "shard");
    let reads = 0;
    const shifty = { shard: "s1", agent: "a", ttlMs: 6_000 } as Record<string, unknown>;
    Object.defineProperty(shifty, "token", { enumerable: true, get: () => (reads++ === 0 ? 8 : 7) });
    expect(parse.parse(shifty)).to.include({ token: 8 });
    expect(reads).to.equal(1);
    // A plain token 7 is not the token-8 parse the getter's first answer made.
    expect(parse.parse({ ...renew, token: 7 })).to.include({ token: 7 });
  });

  it("parses what it compares: a field the comparison cannot see is not seen by the parse either", () => {
    const { ttlMs: _dropped, ...withoutTtl } = renew;
    // ttlMs 5 (refused by the schema) hidden from Object.keys: the same answer whether the
    // input is parsed afresh or matches a remembered one.
    const hidden = { ...withoutTtl };
    Object.defineProperty(hidden, "ttlMs", { enumerable: false, value: 5 });
    expect(new RepeatParse(RenewRequest, "shard").parse(hidden)).to.include({ ttlMs: 6_000 });
    const parse = new RepeatParse(RenewRequest, "shard");
    const first = parse.parse({ ...withoutTtl });
    expect(parse.parse(hidden)).to.equal(first);
  });
});
