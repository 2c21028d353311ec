/**
 * Let the event loop run what is waiting (timers, sockets) before going on. Long loops
 * over pages call it between pages: a store that answers at once (the embedded one)
 * resolves its promises as microtasks, which never let I/O in, and every lease renew
 * waits behind the one event loop.
 */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
