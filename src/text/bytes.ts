/**
 * `bytes` with every occurrence of `from` replaced by `to`, worked on as bytes: no
 * decoding to a string and back. A page of 1,000 nodes from Ironic (~0.5 MB) rewritten
 * as text (toString, split, join, Buffer.from) held the event loop 8–12 ms on this VM;
 * as bytes, one scan and one copy into memory of the final size, 0.7–5 ms. Occurrences
 * do not overlap (each is searched for after the last one's end); `bytes` itself is
 * answered when there is none. UTF-8 needs no care: the bytes of a character never
 * match part of another's.
 */
export function replaceAllBytes(bytes: Buffer, from: Buffer, to: Buffer): Buffer {
  if (from.length === 0) return bytes;
  const found: number[] = [];
  for (let at = bytes.indexOf(from); at !== -1; at = bytes.indexOf(from, at + from.length)) found.push(at);
  if (found.length === 0) return bytes;
  const out = Buffer.allocUnsafe(bytes.length + found.length * (to.length - from.length));
  let read = 0;
  let written = 0;
  for (const at of found) {
    written += bytes.copy(out, written, read, at);
    written += to.copy(out, written);
    read = at + from.length;
  }
  bytes.copy(out, written, read);
  return out;
}
