import { DecodePool } from "../api/decode/decode-pool.js";
import { AgentNodeLists } from "../bridge/shards/agent-nodes.js";
import type { IronicQueueDelivery } from "../bridge/ironic/delivery.js";
import { LegacyAssignments } from "../bridge/legacy-assignment.js";
import { SERVICE_DOWN_TIME_MS } from "../core/ring/membership.js";
import { LegacyPool, type LegacyPoolOptions } from "../core/ring/pool.js";
import { ShardCatalog } from "../bridge/shards/catalog.js";
import { LeaseWaits } from "../bridge/shards/lease-waits.js";
import { legacyPoolLoader } from "../bridge/shards/queries.js";
import { DEFINITIONS_REFRESH_MS, StoredDefinitions } from "../bridge/shards/stored-definitions.js";
import { NodesMark } from "../store/nodes-mark.js";
import type { DefinitionsBackup } from "../bridge/shards/definitions-backup.js";
import type { Store } from "../store/store.js";
import type { TraitRule } from "../bridge/inspection/trait-rules.js";
import { OwnershipRegistry } from "../core/traits/ownership.js";
import { TraitService } from "../bridge/trait-service.js";
import type { BridgeServices } from "../api/app.js";

/** Free unsharded nodes read per store call while nova's ring share is computed. */
const FREE_PAGE = 500;

export interface BridgeServiceOptions {
  catalog?: ShardCatalog;
  /** trait rules, ownership and the webhook secret; defaults: no rules, compute's ownership, no secret */
  inspector?: { rules: TraitRule[]; ownership: OwnershipRegistry; secret?: string | undefined };
  /** the delivery of applied trait changes to Ironic, if any: commits queue them for it */
  ironic?: IronicQueueDelivery;
  /** the legacy ring pool: ring kind, rebuild period, service down time, clock */
  legacy?: LegacyPoolOptions & { serviceDownMs?: number };
  /** the file this bridge keeps the store's shard definitions in (serve --definitions-backup) */
  definitionsBackup?: DefinitionsBackup;
}

/**
 * The composition root: every service the bridge's API serves, built once over `store`
 * (`serve` builds them here and hands them to createApp, as the tests do). The store's
 * shard definitions join the catalog's and are read again when they change.
 */
export function bridgeServices(
  store: Store,
  {
    catalog = new ShardCatalog(),
    inspector = { rules: [], ownership: new OwnershipRegistry() },
    ironic,
    legacy = {},
    definitionsBackup,
  }: BridgeServiceOptions = {},
): BridgeServices {
  const serviceDownMs = legacy.serviceDownMs ?? SERVICE_DOWN_TIME_MS;
  // Read now, then on its timer: a caller that must have them before the first request
  // (serve) awaits refresh(), which shares this read.
  const definitions = new StoredDefinitions(store, catalog, definitionsBackup).start();
  void definitions.refresh().catch(() => undefined); // the timer retries and logs
  return {
    store,
    catalog,
    definitions,
    // Looked at as often as the definitions: a store that lost its nodes is noticed as soon.
    nodesMark: new NodesMark(store).start(DEFINITIONS_REFRESH_MS),
    traits: new TraitService(store.traits, store.nodes, inspector.ownership, {
      toIronic: ironic !== undefined,
      onApplied: () => ironic?.nudge(),
    }),
    // Large bodies (a bulk, an inspection result) are decoded off the event loop.
    decoder: new DecodePool(inspector.rules),
    webhookSecret: inspector.secret,
    ...(ironic && { ironic }),
    legacyPool: new LegacyPool(legacyPoolLoader(store, catalog, serviceDownMs), legacy),
    assignments: new LegacyAssignments({
      pages: async function* () {
        for await (const page of store.nodes.pages({ kind: "free" }, FREE_PAGE))
          yield page.map((n) => n.uuid);
      },
      version: () => store.nodes.poolVersion(),
    }),
    waits: new LeaseWaits(store),
    nodeLists: new AgentNodeLists(store),
    serviceDownMs,
  };
}
