/**
 * Read `read()` every `everyMs` until `done` holds for what it answers: that value, or an
 * error naming `what` and the last value read once `withinMs` have passed.
 */
export async function until<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  withinMs: number,
  everyMs = 50,
): Promise<T> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (performance.now() > deadline)
      throw new Error(`${what}: not within ${withinMs} ms (last: ${JSON.stringify(value)?.slice(0, 500)})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
