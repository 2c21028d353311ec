import { Router, type Request } from "express";
import type { BareMetalNode } from "../../domain/node.js";
import type { NodeRegistry } from "../../nodes/registry.js";
import type { TraitService } from "../../traits/service.js";
import { roleCheck } from "../openapi/operations.js";
import { yieldToLoop } from "../../loop.js";
import { bodyObject } from "../http/body.js";
import { unpackNodes } from "../decode/bulk.js";
import type { DecodePool } from "../decode/decode-pool.js";
import { decodeFailure } from "../decode/failure.js";
import { BULK_PATH } from "../http/limits.js";
import { streamJsonList } from "../http/stream.js";
import { nodeJson } from "../../nodes/json.js";

/** Nodes of a bulk written per store call. */
const BULK_CHUNK = 250;
import { HttpError, nodeNotFound } from "../http/errors.js";
import type { BulkResult, Node } from "../../contracts/nodes.js";

/** The path's uuid, as given: the registry validates and canonicalises it. */
const uuidOf = (req: Request): string => (req.params as { uuid: string }).uuid;

const notFound = (uuid: string): HttpError => new HttpError([nodeNotFound(uuid)]);

/** Each page of nodes as API JSON; declared once, not per request (see listPages in nodes/registry.ts). */
async function* nodesAsJson(pages: AsyncIterable<BareMetalNode[]>): AsyncGenerator<string[]> {
  for await (const page of pages) yield page.map((node) => nodeJson(node));
}

/**
 * Nodes with explicit shard keys, with Ironic's semantics:
 *   PUT    /v1/nodes/{uuid}   the whole node {"name","shard","conductor_group","instance_host"} -> 201 | 200
 *   PATCH  /v1/nodes/{uuid}   some of those fields (merge patch)  -> 200 | 404
 *   GET    /v1/nodes/{uuid}                                       -> 200 | 404
 *   DELETE /v1/nodes/{uuid}                                       -> 204 | 404
 *   GET    /v1/nodes?shard=a,b|sharded=true|false&limit=&marker=  -> 200 {"nodes","next"}
 *   POST   /v1/nodes/bulk     {"nodes":[...]}                     -> 200 {"created","updated"}
 */
export function nodeRoutes(nodes: NodeRegistry, traits: TraitService, decoder: DecodePool): Router {
  const router = Router();

  router.post(BULK_PATH, roleCheck("bulkNodes"), async (req, res) => {
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

  router.put("/v1/nodes/:uuid", roleCheck("putNode"), async (req, res) => {
    const { node, created, moved } = await nodes.put(uuidOf(req), bodyObject(req));
    await traits.snapshotMoves(moved);
    res.status(created ? 201 : 200).json(node satisfies Node);
  });

  router.patch("/v1/nodes/:uuid", roleCheck("patchNode"), async (req, res) => {
    const changed = await nodes.patch(uuidOf(req), bodyObject(req));
    if (changed === null) throw notFound(uuidOf(req));
    await traits.snapshotMoves(changed.moved);
    res.json(changed.node satisfies Node);
  });

  router.get("/v1/nodes/:uuid", async (req, res) => {
    const node = await nodes.get(uuidOf(req));
    if (node === null) throw notFound(uuidOf(req));
    res.json(node satisfies Node);
  });

  router.delete("/v1/nodes/:uuid", roleCheck("deleteNode"), async (req, res) => {
    if (!(await nodes.delete(uuidOf(req)))) throw notFound(uuidOf(req));
    res.status(204).end();
  });

  router.get("/v1/nodes", async (req, res) => {
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

  return router;
}
