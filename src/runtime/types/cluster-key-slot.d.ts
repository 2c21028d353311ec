// The part of the untyped `cluster-key-slot` package (ioredis's own) the bridge uses.
declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot of `key` (CRC16 of its hash tag, mod 16384). */
  export default function calculateSlot(key: string): number;
}
