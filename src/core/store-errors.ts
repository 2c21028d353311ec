/**
 * The store did not answer (Redis down, a timeout, a lost connection). The API answers
 * 503 for it; any other failure is a bug and answers 500.
 */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "StoreUnavailableError";
  }
}

/** Run a store call, turning its failure into a StoreUnavailableError (one promise, no extra await: every renew pays it). */
export function fromStore<T>(call: () => Promise<T>): Promise<T> {
  try {
    return call().catch((error: unknown) => {
      throw new StoreUnavailableError(error);
    });
  } catch (error) {
    return Promise.reject(new StoreUnavailableError(error));
  }
}
