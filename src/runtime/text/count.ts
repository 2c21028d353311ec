/** `n` and the noun, in the plural but for one: "1 node", "0 nodes", "3 shard keys". */
export const count = (n: number, noun: string, plural = `${noun}s`): string =>
  `${n} ${n === 1 ? noun : plural}`;

/** The word that agrees with `n` things: `one` for one, `many` for any other number ("is", "are"). */
export const agreeing = (n: number, one: string, many: string): string => (n === 1 ? one : many);
