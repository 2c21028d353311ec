import { expect } from "chai";
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { LinkRewrite } from "../../src/api/fenced/link-rewrite.js";

/**
 * The fenced endpoint's link rewriting, as Ironic's answer streams through: the same as
 * split and join on the whole text, however the answer is cut into chunks (a link may
 * straddle two).
 */
describe("Rewriting Ironic's links in an answer as it streams", () => {
  const asText = (whole: string, from: string, to: string) => whole.split(from).join(to);
  const streamed = (chunks: readonly Buffer[], from: string, to: string) =>
    text(Readable.from(chunks).pipe(new LinkRewrite(Buffer.from(from), Buffer.from(to))));
  /** `bytes` cut at `cuts` (byte offsets, any order): a character's bytes may land in two chunks. */
  const cut = (bytes: Buffer, cuts: readonly number[]) => {
    const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
    return [0, ...at]
      .map((start, i) => bytes.subarray(start, at[i] ?? bytes.length))
      .filter((c) => c.length > 0);
  };

  it("replaces at the start, at the end, side by side and left to right without overlaps", async () => {
    for (const [whole, from, to] of [
      ["http://i/v1/nodes", "http://i", "https://b/fenced/s/lease-7-k/ironic"],
      ["see http://i", "http://i", "B"],
      ["http://ihttp://i", "http://i", "B"],
      ["aaaaa", "aa", "b"],
      ["aaa", "a", ""],
      ["xyz", "xyz", "longer than it was"],
      ["", "http://i", "B"],
    ] as const)
      for (let size = 1; size <= whole.length + 1; size++) {
        const bytes = Buffer.from(whole);
        const cuts = Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => i * size);
        expect(await streamed(cut(bytes, cuts), from, to), `${whole} in chunks of ${size}`).to.equal(
          asText(whole, from, to),
        );
      }
  });

  it("agrees with split and join on 2,000 random texts with multi-byte characters, cut anywhere", async () => {
    let seed = 42;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const alphabet = ["a", "b", "/", ":", "é", "ж", "😀", "ab", "a/"];
    const word = (length: number) => Array.from({ length }, () => alphabet[next(alphabet.length)]).join("");
    for (let i = 0; i < 2000; i++) {
      const [whole, from, to] = [word(next(40)), word(1 + next(3)), word(next(4))];
      const bytes = Buffer.from(whole);
      const cuts = Array.from({ length: next(6) }, () => next(bytes.length + 1));
      expect(await streamed(cut(bytes, cuts), from, to), JSON.stringify({ whole, from, to, cuts })).to.equal(
        asText(whole, from, to),
      );
    }
  });
});
