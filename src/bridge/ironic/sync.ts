import { BULK_MAX_NODES, BulkNodesRequest, type BareMetalNode } from "../../core/node.js";
import { parseOrThrow } from "../../core/validation.js";
import { logger } from "../../runtime/log.js";
import { yieldToLoop } from "../../runtime/loop.js";
import type { StoredDefinitions } from "../shards/stored-definitions.js";
import type { Store } from "../../store/store.js";
import type { TraitService } from "../trait-service.js";
import type { IronicNode } from "../../upstream/ironic-client.js";

/**
 * Ironic's nodes as the bridge keeps them. Ironic knows a node's instance but not the
 * instance's host, so the host the bridge was told before (`knownHosts`) is kept.
 */
export function toBridgeNodes(
  nodes: readonly IronicNode[],
  knownHosts: ReadonlyMap<string, string | null> = new Map(),
): BareMetalNode[] {
  return nodes.map(({ instance_uuid: _instance, ...node }) => ({
    ...node,
    instance_host: knownHosts.get(node.uuid) ?? null,
  }));
}

/** Where Ironic's nodes are copied to: the bridge over HTTP (`ironic-sync`), or its own store. */
export interface NodeSyncTarget {
  /** the version of the shard definitions (a migration moves it: see syncNodes) */
  definitionsVersion(): Promise<number>;
  /** the instance host the bridge keeps for each node */
  instanceHosts(): Promise<Map<string, string | null>>;
  /** at most BULK_MAX_NODES nodes, written as one bulk */
  upsert(nodes: BareMetalNode[]): Promise<{ created: number; updated: number }>;
}

/**
 * Copy Ironic's nodes (as `readIronic` lists them) into `target`, keeping the instance
 * hosts it was told, BULK_MAX_NODES per write; answers the counts.
 */
export async function syncNodes(
  target: NodeSyncTarget,
  readIronic: () => Promise<IronicNode[]>,
): Promise<{ nodes: number; created: number; updated: number }> {
  // The definitions' version before Ironic is read: if it moves before a write, a
  // migration may have written newer shard keys than this sync read (see below).
  const version = await target.definitionsVersion();
  // Ironic knows a node's instance but not its host: keep the host the bridge was told.
  const nodes = toBridgeNodes(await readIronic(), await target.instanceHosts());
  let created = 0;
  let updated = 0;
  for (let i = 0; i < nodes.length; i += BULK_MAX_NODES) {
    // `migrate apply` writes its keys to Ironic, then changes the shard definitions, then
    // writes the bridge: a sync that read Ironic before those keys must not write its older
    // ones over the bridge's. Its definitions version moved meanwhile: stop, write no more.
    if ((await target.definitionsVersion()) !== version)
      throw new Error(
        `shard definitions changed while this sync read Ironic (a migration may be under way): ` +
          `${i} of ${nodes.length} nodes written, the rest not; run ironic-sync again`,
      );
    const answer = await target.upsert(nodes.slice(i, i + BULK_MAX_NODES));
    created += answer.created;
    updated += answer.updated;
  }
  return { nodes: nodes.length, created, updated };
}

/** Nodes written per store call by storeSyncTarget, the event loop let in between (as a bulk's). */
const STORE_CHUNK = 250;

/**
 * The bridge's own store as a sync's target (serve --ironic, after the store lost its
 * nodes): each node checked as a bulk request's are, then written as a bulk is, a chunk
 * per turn of the event loop.
 */
export function storeSyncTarget(
  store: Store,
  definitions: StoredDefinitions,
  traits: TraitService,
): NodeSyncTarget {
  return {
    definitionsVersion: async () => {
      await definitions.refresh();
      return definitions.readVersion;
    },
    instanceHosts: async () => {
      const hosts = new Map<string, string | null>();
      for await (const page of store.nodes.pages({ kind: "all" }))
        for (const node of page) hosts.set(node.uuid, node.instance_host);
      return hosts;
    },
    upsert: async (nodes) => {
      let created = 0;
      let updated = 0;
      for (let i = 0; i < nodes.length; i += STORE_CHUNK) {
        // Checked a chunk at a time: a whole bulk's parse would hold the event loop.
        const checked = parseOrThrow(BulkNodesRequest, { nodes: nodes.slice(i, i + STORE_CHUNK) }).nodes;
        const written = await store.nodes.upsertValidated(checked);
        created += written.created;
        updated += written.updated;
        await traits.snapshotMoves(written.moved);
        await yieldToLoop();
      }
      return { created, updated };
    },
  };
}

/** How long a resync that failed (Ironic away, a migration under way) waits before the next try. */
export const RESYNC_RETRY_MS = 10_000;

/**
 * Each time `lost` fires (the store lost its nodes: NodesMark), copy Ironic's nodes into
 * the store again with `sync`, trying again every `retryMs` until one succeeds; one at a
 * time, a loss during a resync making one more. Logged at the start, the first failure
 * and the end.
 */
export function resyncAfterLoss(
  lost: { on(event: "lost", listener: () => void): unknown },
  sync: () => Promise<{ nodes: number; created: number; updated: number }>,
  retryMs = RESYNC_RETRY_MS,
): void {
  let running = false;
  let again = false;
  const run = async (): Promise<void> => {
    running = true;
    logger.info("reading the nodes again from Ironic (the store lost them)");
    for (let attempt = 1; ; attempt++) {
      again = false;
      try {
        const counts = await sync();
        logger.info("nodes read again from Ironic", { ...counts, attempts: attempt });
        if (!again) break;
      } catch (error) {
        if (attempt === 1)
          logger.error("nodes not read again from Ironic: trying again", {
            error: String(error),
            retry_ms: retryMs,
          });
        await new Promise((r) => setTimeout(r, retryMs).unref());
      }
    }
    running = false;
  };
  lost.on("lost", () => {
    if (running) again = true;
    else void run();
  });
}
