/**
 * A seeded pseudo-random source (sfc32): same seed, same sequence, on every machine.
 * For simulations, generated fleets and tests; never for secrets.
 */
export function seededRandom(seed: number): () => number {
  let a = 0x9e3779b9;
  let b = 0x243f6a88;
  let c = 0xb7e15162;
  let d = seed >>> 0;
  const next = (): number => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next(); // mix the seed in before the first answer
  return next;
}

/** A version-4-shaped UUID (lower case) drawn from `random`. */
export function randomUuid(random: () => number): string {
  // Four 32-bit draws give the 128 bits; then the version and variant nibbles are set.
  const word = () =>
    Math.floor(random() * 4294967296)
      .toString(16)
      .padStart(8, "0");
  const [a, b, c, d] = [word(), word(), word(), word()];
  const variant = "89ab"[parseInt(c[0]!, 16) & 3]!;
  return `${a}-${b.slice(0, 4)}-4${b.slice(5, 8)}-${variant}${c.slice(1, 4)}-${c.slice(4)}${d}`;
}
