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

/** Until `check` answers true, asked every `everyMs`; an error naming `what` once `withinMs` have passed. */
export async function untilTrue(
  what: string,
  check: () => Promise<boolean>,
  withinMs = 30_000,
  everyMs = 100,
): Promise<void> {
  await until(what, check, (ok) => ok, withinMs, everyMs);
}

/** Until `ready` answers something other than null, asked every `everyMs`: that answer. */
export async function untilSome<T>(
  what: string,
  ready: () => T | null | Promise<T | null>,
  withinMs: number,
  everyMs = 500,
): Promise<T> {
  return (await until(
    what,
    async () => ready(),
    (answer) => answer !== null,
    withinMs,
    everyMs,
  )) as T;
}
