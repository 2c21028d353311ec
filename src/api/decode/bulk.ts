import { BulkNodesRequest, type BareMetalNode } from "../../domain/node.js";
import { parseOrThrow } from "../../domain/validation.js";
import { decodeNode, encodeNode } from "../../nodes/record.js";
import { decodeObject, type Decoded } from "./result.js";

/** Between a packed node's uuid and its record, and between nodes: no field holds a control character. */
const UUID = "\u001d";
const NODE = "\u001e";

/**
 * A bulk body, decoded: its nodes packed into one string (uuid, then the node's record
 * as the store keeps it, see record.ts; nodes joined by ␞). A worker hands a string back
 * for the cost of a copy; 20,000 node objects would cost the event loop 20–70 ms to receive.
 */
export interface PackedNodes {
  packed: string;
  count: number;
}

export function decodeBulk(text: string): Decoded<PackedNodes> {
  return decodeObject(text, (body) => {
    const { nodes } = parseOrThrow(BulkNodesRequest, body);
    const packed = nodes.map((node) => `${node.uuid}${UUID}${encodeNode(node)}`).join(NODE);
    return { packed, count: nodes.length };
  });
}

/** The packed nodes, `size` at a time, for the store's chunks. */
export function* unpackNodes({ packed, count }: PackedNodes, size: number): Generator<BareMetalNode[]> {
  if (count === 0) return;
  const all = packed.split(NODE);
  for (let i = 0; i < all.length; i += size) {
    yield all.slice(i, i + size).map((line) => {
      const split = line.indexOf(UUID);
      return decodeNode(line.slice(0, split), line.slice(split + 1));
    });
  }
}
