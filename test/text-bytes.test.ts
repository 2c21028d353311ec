import { expect } from "chai";
import { replaceAllBytes } from "../src/text/bytes.js";

/** replaceAllBytes (the fenced endpoint's link rewriting) replaces as split/join does on text. */
describe("replacing bytes within bytes", () => {
  const asText = (text: string, from: string, to: string) => Buffer.from(text.split(from).join(to));
  const replaced = (text: string, from: string, to: string) =>
    replaceAllBytes(Buffer.from(text), Buffer.from(from), Buffer.from(to));

  it("answers the bytes themselves when there is nothing to replace", () => {
    const bytes = Buffer.from('{"nodes":[]}');
    expect(replaceAllBytes(bytes, Buffer.from("http://ironic"), Buffer.from("x"))).to.equal(bytes);
    expect(replaceAllBytes(bytes, Buffer.alloc(0), Buffer.from("x"))).to.equal(bytes);
  });

  it("replaces at the start, at the end, side by side and left to right without overlaps", () => {
    for (const [text, from, to] of [
      ["http://i/v1/nodes", "http://i", "https://b/fenced/s/lease-7/ironic"],
      ["see http://i", "http://i", "B"],
      ["http://ihttp://i", "http://i", "B"],
      ["aaaaa", "aa", "b"],
      ["aaa", "a", ""],
      ["xyz", "xyz", "longer than it was"],
    ] as const)
      expect(replaced(text, from, to).toString()).to.equal(asText(text, from, to).toString());
  });

  it("agrees with split and join on 2,000 random texts with multi-byte characters", () => {
    let seed = 42;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const alphabet = ["a", "b", "/", ":", "é", "ж", "😀", "ab", "a/"];
    const word = (length: number) => Array.from({ length }, () => alphabet[next(alphabet.length)]).join("");
    for (let i = 0; i < 2000; i++) {
      const [text, from, to] = [word(next(40)), word(1 + next(3)), word(next(4))];
      expect(
        replaced(text, from, to).equals(asText(text, from, to)),
        JSON.stringify({ text, from, to }),
      ).to.equal(true);
    }
  });
});
