import { DeclaredRoutes } from "../http/declared-routes.js";
import { parseOrThrow } from "../../core/validation.js";
import type { ShardDefinitionFile } from "../../contracts/shards.js";
import type { ShardCatalog } from "../../bridge/shards/catalog.js";
import {
  DEFINITIONS_REFRESH_MS,
  DefinedByFileError,
  type StoredDefinitions,
} from "../../bridge/shards/stored-definitions.js";
import { bodyObject } from "../http/body.js";
import { HttpError, conflict } from "../http/errors.js";
import { ShardPath } from "../http/paths.js";
import type { ShardDefinitionList, ShardDefinitionWritten } from "../../contracts/shards.js";
import { READ, ADMIN, type Operation } from "../openapi/operation.js";

/** The shard definition routes' operations, as the document lists them (operations.ts) and the role checks read them. */
export const SHARD_DEFINITION_OPERATIONS = {
  listShardDefinitions: {
    method: "get",
    path: "/v1/shard-definitions",
    id: "listShardDefinitions",
    tag: "shards",
    summary: "Every shard definition: this bridge's files and the store's",
    description:
      "`source`: `file` (this bridge's `shards/`) or `store` (written through this API, the same for every bridge on the store). `version` changes with every write to the store's; `refresh_ms`: how soon every bridge uses a write.",
    access: READ,
    answers: { 200: { description: "the definitions", schema: "ShardDefinitionList" } },
  },
  putShardDefinition: {
    method: "put",
    path: "/v1/shard-definitions/{shard}",
    id: "putShardDefinition",
    tag: "shards",
    summary: "Define a shard in the store, for every bridge on it",
    description:
      "TTL, allowed agents (left out: any), description, and `filling` (`migrate apply`'s mark: while set, a lease on the shard or a heartbeat declaring it keeps the agent in nova's legacy pool). In force on this bridge when answered, on every other within `takes_effect_within_ms`.",
    access: ADMIN,
    parameters: ["shard"],
    body: "ShardDefinitionBody",
    answers: {
      200: { description: "replaced", schema: "ShardDefinitionWritten" },
      201: { description: "created", schema: "ShardDefinitionWritten" },
      409: {
        description:
          "a file of this bridge defines the shard, or a shard equal to it but for case is defined (one shard to nova and Ironic's database); nothing written",
        codes: ["shard.defined_by_file", "shard.case_twin"],
      },
    },
  },
  deleteShardDefinition: {
    method: "delete",
    path: "/v1/shard-definitions/{shard}",
    id: "deleteShardDefinition",
    tag: "shards",
    summary: "Remove a shard's definition from the store",
    access: ADMIN,
    parameters: ["shard"],
    answers: {
      204: { description: "removed" },
      404: { description: "the store holds no definition of the shard", codes: ["shard.not_defined"] },
      409: { description: "a file of this bridge defines the shard", codes: ["shard.defined_by_file"] },
    },
  },
} satisfies Record<string, Operation>;

/** A definition as the API shows it: every field, `agents` null for any agent, and where it comes from. */
export function definitionJson(definition: ShardDefinitionFile, catalog: ShardCatalog) {
  return {
    name: definition.name,
    description: definition.description,
    lease_ttl_ms: definition.lease_ttl_ms,
    agents: definition.agents ?? null,
    filling: definition.filling === true,
    // never null: the catalog holds every definition it is asked about here (listed, or just written)
    source: catalog.sourceOf(definition.name)!,
  };
}

const definedByFile = (error: DefinedByFileError) =>
  new HttpError([
    conflict("shard.defined_by_file", "Shard defined by a file", error.message, { field: "shard" }),
  ]);

/**
 * Shard definitions kept in the store, so every bridge on it serves the same ones:
 *   GET    /v1/shard-definitions          -> 200 {"version","refresh_ms","definitions":[…]} (files' and the store's)
 *   PUT    /v1/shard-definitions/{shard}  {"description"?,"lease_ttl_ms"?,"agents"?,"filling"?} (admin)
 *                                         -> 201 created | 200 replaced, the definition
 *   DELETE /v1/shard-definitions/{shard}  (admin) -> 204 | 404
 * A write is in force on this bridge when it is answered and on every bridge of the same
 * store within `refresh_ms`. A shard a file of this bridge defines is the file's: 409.
 */
export function definitionRoutes(stored: StoredDefinitions, catalog: ShardCatalog): DeclaredRoutes {
  const routes = new DeclaredRoutes();

  routes.serve(SHARD_DEFINITION_OPERATIONS.listShardDefinitions, async (_req, res) => {
    await stored.refresh();
    res.json({
      version: stored.readVersion,
      refresh_ms: DEFINITIONS_REFRESH_MS,
      definitions: catalog.definitions.map((d) => definitionJson(d, catalog)),
    } satisfies ShardDefinitionList);
  });

  routes.serve(SHARD_DEFINITION_OPERATIONS.putShardDefinition, async (req, res) => {
    const { shard } = parseOrThrow(ShardPath, req.params);
    try {
      const { definition, created } = await stored.put(shard, bodyObject(req));
      res.status(created ? 201 : 200).json({
        ...definitionJson(definition, catalog),
        takes_effect_within_ms: DEFINITIONS_REFRESH_MS,
      } satisfies ShardDefinitionWritten);
    } catch (error) {
      if (error instanceof DefinedByFileError) throw definedByFile(error);
      throw error;
    }
  });

  routes.serve(SHARD_DEFINITION_OPERATIONS.deleteShardDefinition, async (req, res) => {
    const { shard } = parseOrThrow(ShardPath, req.params);
    try {
      if (!(await stored.remove(shard)))
        throw new HttpError([
          {
            status: 404,
            code: "shardbridge.shard.not_defined",
            title: "No stored definition",
            detail: `the store holds no definition of shard ${shard}`,
          },
        ]);
      res.status(204).end();
    } catch (error) {
      if (error instanceof DefinedByFileError) throw definedByFile(error);
      throw error;
    }
  });

  return routes;
}
