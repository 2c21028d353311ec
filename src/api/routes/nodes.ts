import { DeclaredRoutes } from "../http/declared-routes.js";
import type { Request } from "express";
import type { BareMetalNode } from "../../core/node.js";
import type { NodeRegistry } from "../../store/node-registry.js";
import type { TraitService } from "../../bridge/trait-service.js";
import { yieldToLoop } from "../../runtime/loop.js";
import { bodyObject } from "../http/body.js";
import { unpackNodes } from "../decode/bulk.js";
import type { DecodePool } from "../decode/decode-pool.js";
import { decodeFailure } from "../decode/failure.js";
import { BULK_BODY } from "../http/limits.js";
import { streamJsonList } from "../http/stream.js";
import { nodeJson } from "../../store/node-json.js";

/** Nodes of a bulk written per store call. */
const BULK_CHUNK = 250;
import { HttpError, nodeNotFound } from "../http/errors.js";
import type { BulkResult, Node } from "../../contracts/nodes.js";
import { NodeListQuery } from "../../core/node.js";
import { READ, ADMIN, NO_NODE, type Operation } from "../openapi/operation.js";

/** The path's uuid, as given: the registry validates and canonicalises it. */
const uuidOf = (req: Request): string => (req.params as { uuid: string }).uuid;

const notFound = (uuid: string): HttpError => new HttpError([nodeNotFound(uuid)]);

/** Each page of nodes as API JSON; declared once, not per request (see listPages in nodes/registry.ts). */
async function* nodesAsJson(pages: AsyncIterable<BareMetalNode[]>): AsyncGenerator<string[]> {
  for await (const page of pages) yield page.map((node) => nodeJson(node));
}

/** The node routes' operations, as the document lists them (operations.ts) and the role checks read them. */
export const NODE_OPERATIONS = {
  bulkNodes: {
    method: "post",
    path: "/v1/nodes/bulk",
    id: "bulkNodes",
    tag: "nodes",
    summary: "Create or replace up to 20,000 whole nodes",
    description: "Every node is validated before any is written; no uuid twice.",
    access: ADMIN,
    bodyPolicy: BULK_BODY,
    body: "BulkNodes",
    answers: { 200: { description: "how many were created and updated", schema: "BulkResult" } },
  },
  putNode: {
    method: "put",
    path: "/v1/nodes/{uuid}",
    id: "putNode",
    tag: "nodes",
    summary: "Create or replace a whole node",
    description:
      'Every field must be given (`null` for no name, `"shard": null` for the unsharded pool, `""` for the default conductor group, `"instance_host": null`): one left out is a 400, never a default. `uuid`, if given, equals the path\'s.',
    access: ADMIN,
    parameters: ["uuid"],
    body: "NodeInput",
    answers: {
      200: { description: "replaced", schema: "Node" },
      201: { description: "created", schema: "Node" },
    },
  },
  patchNode: {
    method: "patch",
    path: "/v1/nodes/{uuid}",
    id: "patchNode",
    tag: "nodes",
    summary: "Change some fields of a node (JSON merge patch)",
    description:
      "Fields given replace the stored ones (`null` clears), the rest stay; under a compare-and-set.",
    access: ADMIN,
    parameters: ["uuid"],
    body: "NodePatch",
    answers: {
      200: { description: "the node as now stored", schema: "Node" },
      404: NO_NODE,
    },
  },
  getNode: {
    method: "get",
    path: "/v1/nodes/{uuid}",
    id: "getNode",
    tag: "nodes",
    summary: "One node",
    access: READ,
    parameters: ["uuid"],
    answers: {
      200: { description: "the node", schema: "Node" },
      404: NO_NODE,
    },
  },
  deleteNode: {
    method: "delete",
    path: "/v1/nodes/{uuid}",
    id: "deleteNode",
    tag: "nodes",
    summary: "Delete a node",
    access: ADMIN,
    parameters: ["uuid"],
    answers: {
      204: { description: "deleted" },
      404: NO_NODE,
    },
  },
  listNodes: {
    method: "get",
    path: "/v1/nodes",
    id: "listNodes",
    tag: "nodes",
    summary: "Nodes in uuid order, a page at a time",
    access: READ,
    query: {
      schema: NodeListQuery,
      describe: {
        shard: "comma-separated shard keys (at most 100)",
        sharded: "true: nodes in some shard; false: the unsharded pool",
        limit: "page size",
        marker: "the last uuid of the previous page",
      },
    },
    answers: { 200: { description: "a page; `next` the next page's URL, or null", schema: "NodeList" } },
  },
} satisfies Record<string, Operation>;

/**
 * Nodes with explicit shard keys, with Ironic's semantics:
 *   PUT    /v1/nodes/{uuid}   the whole node {"name","shard","conductor_group","instance_host"} -> 201 | 200
 *   PATCH  /v1/nodes/{uuid}   some of those fields (merge patch)  -> 200 | 404
 *   GET    /v1/nodes/{uuid}                                       -> 200 | 404
 *   DELETE /v1/nodes/{uuid}                                       -> 204 | 404
 *   GET    /v1/nodes?shard=a,b|sharded=true|false&limit=&marker=  -> 200 {"nodes","next"}
 *   POST   /v1/nodes/bulk     {"nodes":[...]}                     -> 200 {"created","updated"}
 */
export function nodeRoutes(nodes: NodeRegistry, traits: TraitService, decoder: DecodePool): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(NODE_OPERATIONS.bulkNodes, async (req, res) => {
    const decoded = await decoder.decode({ kind: "bulk" }, req.bodyChunks!);
    if (!decoded.ok) throw decodeFailure(decoded);
    // Every node was validated before any is written; now a chunk at a time, yielding
    // between chunks, so 20,000 nodes never hold the event loop.
    let created = 0;
    let updated = 0;
    for (const chunk of unpackNodes(decoded.value, BULK_CHUNK)) {
      const written = await nodes.upsertValidated(chunk);
      created += written.created;
      updated += written.updated;
      await traits.snapshotMoves(written.moved);
      await yieldToLoop();
    }
    res.json({ created, updated } satisfies BulkResult);
  });

  routes.serve(NODE_OPERATIONS.putNode, async (req, res) => {
    const { node, created, moved } = await nodes.put(uuidOf(req), bodyObject(req));
    await traits.snapshotMoves(moved);
    res.status(created ? 201 : 200).json(node satisfies Node);
  });

  routes.serve(NODE_OPERATIONS.patchNode, async (req, res) => {
    const changed = await nodes.patch(uuidOf(req), bodyObject(req));
    if (changed === null) throw notFound(uuidOf(req));
    await traits.snapshotMoves(changed.moved);
    res.json(changed.node satisfies Node);
  });

  routes.serve(NODE_OPERATIONS.getNode, async (req, res) => {
    const node = await nodes.get(uuidOf(req));
    if (node === null) throw notFound(uuidOf(req));
    res.json(node satisfies Node);
  });

  routes.serve(NODE_OPERATIONS.deleteNode, async (req, res) => {
    if (!(await nodes.delete(uuidOf(req)))) throw notFound(uuidOf(req));
    res.status(204).end();
  });

  routes.serve(NODE_OPERATIONS.listNodes, async (req, res) => {
    const listing = nodes.openList(req.query);
    const nextLink = () => {
      const marker = listing.next();
      if (marker === null) return { next: null };
      const query = new URLSearchParams(req.query as Record<string, string>);
      query.set("marker", marker);
      return { next: `/v1/nodes?${query.toString()}` };
    };
    // Up to 10,000 nodes, read and written a page at a time (the backend's listPage); `next` after them (as
    // Ironic places it), known once the last is out.
    await streamJsonList(res, {}, "nodes", nodesAsJson(listing.nodes), nextLink);
  });

  return routes;
}
