// The parts of the untyped `hashring` package (ketama, libketama-compatible) the bridge uses.
declare module "hashring" {
  export default class HashRing {
    constructor(
      servers: string[] | Record<string, unknown>,
      algorithm?: string,
      options?: Record<string, unknown>,
    );
    get(key: string): string | undefined;
  }
}
