/**
 * Bytes handed between the event loop and the decode worker without a copy where that is
 * safe. postMessage copies what it is not told to transfer, and a copy of a megabyte is
 * not only a memcpy: fresh pages fault in one by one, which on this kind of VM held the
 * event loop for 15–30 ms per bulk of 20,000 nodes (two copies of its 2.6 MB on the way
 * in, one more on the way out). A transferred buffer moves; its sender's view is
 * emptied, so a sender hands over only bytes it will not read again.
 */

/**
 * `bytes` in memory of their own, ready to transfer: as they are when they span a whole
 * ArrayBuffer (Buffer.concat and Buffer.from allocate one for anything but a few KB),
 * else copied once. A slice of Node's shared pool (small Buffers) is never transferred:
 * the other Buffers in that pool would lose their memory with it.
 */
export function ownBytes(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const whole =
    bytes.buffer instanceof ArrayBuffer &&
    bytes.byteOffset === 0 &&
    bytes.byteLength === bytes.buffer.byteLength;
  return whole ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
}
