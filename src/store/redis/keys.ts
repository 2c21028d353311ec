import { createHash } from "node:crypto";

/**
 * Redis key layout. Every key of one shard shares the hash tag `{shard:NAME}` so each
 * script touches a single slot and runs unchanged on Redis Cluster. Shard names cannot
 * contain braces (see ShardName), so the tag is unambiguous.
 */
export interface KeyLayout {
  lease(shard: string): string;
  /** SCAN pattern matching every shard's lease key, and how to read the shard back */
  leasePattern: string;
  shardOfLeaseKey(key: string): string;
  /**
   * agent -> last heartbeat (sorted set, store ms), agent -> shards it serves (hash), host
   * key -> agent (hash), and per agent its instances' last declarations (a hash), one slot
   */
  agents: { seen: string; serves: string; hosts: string; instances(agent: string): string };
  /**
   * The lease directory, under its own tag: every shard ever granted (a sorted set, so
   * listings never scan the keyspace) and, per agent, the shards it was granted.
   */
  leases: { shards: string; grantedTo(agent: string): string };
  /**
   * Shard definitions written through the API, under their own tag, one slot: name ->
   * record (a hash, the live ones), name -> version of its last write (a sorted set, the
   * removed ones too), the version of the last write, each name by its key (lower-cased:
   * one shard to nova and Ironic; definitions-write.lua), and the mark an empty store is
   * given (src/store/ports/definitions.ts).
   */
  definitions: { records: string; version: string; names: string; changes: string; mark: string };
  /**
   * The node registry lives under one hash tag, `{nodes}`, so that moving a node between
   * shards is one atomic script on one slot (nodes-common.lua draws the keys under
   * `prefix`): data buckets, per-place and per-host indexes, counts and versions.
   */
  nodes: {
    prefix: string;
    bucket(uuid: string): string;
    counts: string;
    placeVersions: string;
    /** the registry's mark (NodeBackend.mark) */
    mark: string;
    /** the layout before indexed buckets, migrated at connect (see RedisNodes.migrate) */
    legacy: {
      data: string;
      place: string;
      counts: string;
      unsharded: string;
      members(shard: string): string;
    };
  };
  /**
   * Node traits, the per-shard feeds and their cursors, and webhook deliveries share the
   * `{nodes}` tag too: a trait commit, its feed entry and the delivery's answer are one
   * script. `noFeed` and `noDelivery` are the stand-in keys a commit without them names
   * (the script leaves them alone).
   */
  traits: {
    /** the bucket (as the nodes' data) holding a node's trait record */
    bucket(uuid: string): string;
    feed(shard: string): string;
    noFeed: string;
    cursor(shard: string): string;
    /** a webhook delivery's remembered answer */
    delivery(id: string): string;
    noDelivery: string;
    /** the layout before bucketed records, migrated at connect */
    legacyRecord(uuid: string): string;
    legacyPattern: string;
  };
  /**
   * The queue of trait changes for Ironic, under the `{nodes}` tag too: a trait commit
   * enqueues its changes in the same script (see src/store/ports/ironic-queue.ts). `noQueue` is the stand-in
   * a commit without Ironic names for the four queue keys (the script leaves it alone).
   */
  ironic: {
    /** a partition's stream of queued changes, one entry per commit, oldest first */
    queue(partition: number): string;
    /** a partition's nodes whose changes were folded past the queue's bound: node -> record */
    merged(partition: number): string;
    /** every folded node -> when its record began (store ms), for the oldest pending */
    mergedSince: string;
    /** store-wide counters: pending changes, delivered, retried, given up, coalesced */
    stats: string;
    /** the latest changes given up (a bounded stream) */
    undeliverable: string;
    /** delivery workers (bridges) -> last heartbeat, store ms */
    workers: string;
    /** the partition count this store was first used with */
    partitions: string;
    noQueue: string;
    /** the namespace of the partitions' owner leases (a lease layout of its own) */
    ownersNamespace: string;
  };
}

/**
 * The bucket of a node's record (and its trait record): the first 3 hex digits of the
 * SHA-1 of its uuid, as nodes-common.lua draws it — 4,096 buckets, evenly filled whatever
 * the uuids look like (sequential ones would pile into one bucket by their prefix).
 */
function bucketOf(uuid: string): string {
  return createHash("sha1").update(uuid).digest("hex").slice(0, 3);
}

export function keyLayout(namespace = "sb"): KeyLayout {
  const nodes = `${namespace}:{nodes}`;
  return {
    lease: (shard) => `${namespace}:{shard:${shard}}:lease`,
    leasePattern: `${namespace}:{shard:*}:lease`,
    shardOfLeaseKey: (key) => key.slice(`${namespace}:{shard:`.length, -"}:lease".length),
    agents: {
      seen: `${namespace}:{agents}:seen`,
      serves: `${namespace}:{agents}:serves`,
      hosts: `${namespace}:{agents}:hosts`,
      instances: (agent) => `${namespace}:{agents}:instances:${agent}`,
    },
    leases: {
      shards: `${namespace}:{leases}:shards`,
      grantedTo: (agent) => `${namespace}:{leases}:to:${agent}`,
    },
    definitions: {
      records: `${namespace}:{definitions}:records`,
      version: `${namespace}:{definitions}:version`,
      names: `${namespace}:{definitions}:names`,
      changes: `${namespace}:{definitions}:changes`,
      mark: `${namespace}:{definitions}:mark`,
    },
    nodes: {
      prefix: `${nodes}:`,
      bucket: (uuid) => `${nodes}:d:${bucketOf(uuid)}`,
      counts: `${nodes}:c`,
      placeVersions: `${nodes}:pv`,
      mark: `${nodes}:mark`,
      legacy: {
        data: `${nodes}:data`,
        place: `${nodes}:place`,
        counts: `${nodes}:counts`,
        unsharded: `${nodes}:unsharded`,
        members: (shard) => `${nodes}:in:${shard}`,
      },
    },
    traits: {
      bucket: (uuid) => `${nodes}:t:${bucketOf(uuid)}`,
      feed: (shard) => `${nodes}:feed:${shard}`,
      noFeed: `${nodes}:nofeed`,
      cursor: (shard) => `${nodes}:cursor:${shard}`,
      delivery: (id) => `${nodes}:delivery:${id}`,
      noDelivery: `${nodes}:nodelivery`,
      legacyRecord: (uuid) => `${nodes}:traits:${uuid}`,
      legacyPattern: `${nodes}:traits:*`,
    },
    ironic: {
      queue: (partition) => `${nodes}:ironic:queue:${partition}`,
      merged: (partition) => `${nodes}:ironic:merged:${partition}`,
      mergedSince: `${nodes}:ironic:merged-since`,
      stats: `${nodes}:ironic:stats`,
      undeliverable: `${nodes}:ironic:undeliverable`,
      workers: `${nodes}:ironic:workers`,
      partitions: `${nodes}:ironic:partitions`,
      noQueue: `${nodes}:ironic:noqueue`,
      ownersNamespace: `${namespace}:ironic`,
    },
  };
}
