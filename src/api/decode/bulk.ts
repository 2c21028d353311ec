import { BulkNodesRequest, type BareMetalNode } from "../../core/node.js";
import { parseOrThrow } from "../../core/validation.js";
import { decodeNode, encodeNode } from "../../store/node-record.js";
import { decodeObject, type Decoded } from "./result.js";

/** Between a packed node's uuid and its record, and between nodes: no field holds a control character. */
const UUID = "\u001d";
const NODE = "\u001e";
const NODE_BYTE = NODE.charCodeAt(0);

/**
 * A bulk body, decoded: its nodes packed as UTF-8 (uuid, then the node's record as the
 * store keeps it, see record.ts; nodes joined by ␞). A worker hands bytes back for free
 * (transferred, see transfer.ts); 20,000 node objects would cost the event loop 20–70 ms
 * to receive, and even one string of them a copy of megabytes. The event loop decodes
 * them a chunk at a time (unpackNodes).
 */
export interface PackedNodes {
  packed: Uint8Array;
  count: number;
}

export function decodeBulk(text: string): Decoded<PackedNodes> {
  return decodeObject(text, (body) => {
    const { nodes } = parseOrThrow(BulkNodesRequest, body);
    const packed = nodes.map((node) => `${node.uuid}${UUID}${encodeNode(node)}`).join(NODE);
    return { packed: Buffer.from(packed, "utf8"), count: nodes.length };
  });
}

/**
 * The packed nodes, `size` at a time, for the store's chunks: each chunk found and decoded
 * when it is asked for, so no step holds the event loop for more than one chunk.
 */
export function* unpackNodes({ packed, count }: PackedNodes, size: number): Generator<BareMetalNode[]> {
  if (count === 0) return;
  const bytes = Buffer.from(packed.buffer, packed.byteOffset, packed.byteLength);
  for (let start = 0, left = count; left > 0; left -= size) {
    let end = start;
    for (let n = Math.min(size, left); n > 0; n--) {
      const next = bytes.indexOf(NODE_BYTE, end);
      end = next === -1 ? bytes.length : next + 1;
    }
    const chunk = bytes.toString("utf8", start, end === bytes.length ? end : end - 1);
    start = end;
    yield chunk.split(NODE).map((line) => {
      const split = line.indexOf(UUID);
      return decodeNode(line.slice(0, split), line.slice(split + 1));
    });
  }
}
