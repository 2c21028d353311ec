import { z } from "zod";
import { NodePatch, NodeUuid } from "../core/node.js";
import { wholeNumber } from "./fields.js";

/** A node as the API shows it: its uuid and every field a client sets (none left out). */
export const Node = z.strictObject({ uuid: NodeUuid, ...NodePatch.required().shape });
export type Node = z.infer<typeof Node>;

/** GET /v1/nodes: a page; `next` the next page's URL, or null. */
export const NodeList = z.strictObject({ nodes: z.array(Node), next: z.string().nullable() });
export type NodeList = z.infer<typeof NodeList>;

/** POST /v1/nodes/bulk. */
export const BulkResult = z.strictObject({ created: wholeNumber, updated: wholeNumber });
export type BulkResult = z.infer<typeof BulkResult>;
