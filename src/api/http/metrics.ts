import { DeclaredRoutes } from "./declared-routes.js";
import type { RequestHandler } from "express";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { CellCounter, CellHistogram } from "./metric-cells.js";
import { ShardLabels } from "./shard-labels.js";
import type { DeliveryStats, IronicQueueDelivery } from "../../bridge/ironic/delivery.js";
import type { Store } from "../../store/store.js";
import type { Operation } from "../openapi/operation.js";

/** GET /metrics, as the document lists it. */
export const METRICS_OPERATIONS = {
  metrics: {
    method: "get",
    path: "/metrics",
    id: "metrics",
    tag: "operations",
    summary: "Prometheus metrics",
    access: { kind: "public" },
    answers: {
      200: {
        description: "Prometheus text exposition",
        content: [{ type: "text/plain", schema: { type: "string" } }],
      },
    },
  },
} satisfies Record<string, Operation>;

/** What the Ironic gauges show before the store was ever read. */
const EMPTY_STATS = {
  queue: { pendingChanges: 0, oldestPendingMs: 0, coalesced: 0 },
  worker: { partitions: [], delivered: 0, retried: 0, given_up: 0 },
};

/**
 * Prometheus metrics of one bridge (a registry per app, so tests can build many apps).
 * Lease counters are counted where the API decides, label values are bounded: shards
 * only those the store knows (ShardLabels), reasons and routes from the code. What a
 * lease request or any request records is a metric cell (metric-cells.ts): every renew,
 * every standby's poll (at scale the most frequent request) and every fenced Ironic call
 * counts here.
 */
export class BridgeMetrics {
  readonly registry = new Registry();
  readonly leaseAcquired = new CellCounter({
    name: "shardbridge_lease_acquired_total",
    help: "Leases granted (new holder, new token), by shard",
    labelNames: ["shard"],
    registry: this.registry,
  });
  readonly leaseLost = new CellCounter({
    name: "shardbridge_lease_lost_total",
    help: "Renewals refused, so the caller lost its lease, by shard and reason",
    labelNames: ["shard", "reason"],
    registry: this.registry,
  });
  readonly leaseRefused = new CellCounter({
    name: "shardbridge_lease_refused_total",
    help: "Acquisitions refused, by shard and reason (held, recovering)",
    labelNames: ["shard", "reason"],
    registry: this.registry,
  });
  readonly fencedRequests = new CellCounter({
    name: "shardbridge_fenced_requests_total",
    help: "Requests to the fenced Ironic endpoint, by shard and outcome (forwarded, refused)",
    labelNames: ["shard", "outcome"],
    registry: this.registry,
  });
  /** Store time of each renew (a cell: see metric-cells.ts, every renew records it) */
  readonly renewSeconds = new CellHistogram({
    name: "shardbridge_lease_renew_seconds",
    help: "Store time of one lease renewal",
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registry: this.registry,
  }).at();
  private readonly requests = new CellCounter({
    name: "shardbridge_http_requests_total",
    help: "HTTP requests by route, method and status",
    labelNames: ["route", "method", "status"],
    registry: this.registry,
  });
  private readonly requestSeconds = new CellHistogram({
    name: "shardbridge_http_request_seconds",
    help: "HTTP request duration by route",
    labelNames: ["route"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registry: this.registry,
  });

  /** which shards the counters name (see ShardLabels) */
  private readonly shardLabels: ShardLabels;

  /** The label for `shard`, of which nothing more is known than its name: itself only when the store knows it. */
  shardLabel(shard: string): string {
    return this.shardLabels.of(shard);
  }

  /** The label for `shard`, whose lease state the caller saw in the store. */
  knownShardLabel(shard: string): string {
    return this.shardLabels.ofKnown(shard);
  }

  /** `defined`: whether a definition names the shard (the catalog's), for its label. */
  constructor(store: Store, defined: (shard: string) => boolean = () => false) {
    this.shardLabels = new ShardLabels(defined);
    // The loop's delay sampled every 1 ms, not prom-client's default 10: a reading of D ms
    // then says some task held the loop between D - 1 and D ms (with 10 ms, anything from
    // D - 10 to D), which is what "no request holds it over 10 ms" needs. A 1 ms timer in
    // libuv costs an idle bridge a wake-up a millisecond and no JavaScript.
    collectDefaultMetrics({
      register: this.registry,
      prefix: "shardbridge_",
      eventLoopMonitoringPrecision: 1,
    });
    const labels = this.shardLabels;
    new Gauge({
      name: "shardbridge_nodes",
      help: 'Nodes per shard (shard="None": unsharded)',
      labelNames: ["shard"],
      registers: [this.registry],
      async collect() {
        const [counts, leased] = await Promise.all([store.nodes.counts(), store.leasedShards()]);
        this.reset();
        for (const { shard, count } of counts) this.set({ shard: shard ?? "None" }, count);
        // What the store knows of shards, read anyway for this gauge: the counters' labels follow it.
        labels.storeLists([...leased, ...counts.flatMap(({ shard }) => (shard === null ? [] : [shard]))]);
      },
    });
  }

  /**
   * A store that lost its data, as this bridge noticed it (src/bridge/shards/stored-definitions.ts,
   * src/store/nodes-mark.ts): each part's losses, and the shard definitions it gave back.
   */
  watchStoreLosses(
    definitions: { readonly counts: { readonly losses: number; readonly restored: number } },
    nodes: { readonly losses: number },
  ): void {
    const registers = [this.registry];
    new Counter({
      name: "shardbridge_store_losses_total",
      help: "Times this bridge found the store had lost its data (came back empty, or a failover lost writes), by part",
      labelNames: ["part"],
      registers,
      collect() {
        this.reset();
        this.inc({ part: "definitions" }, definitions.counts.losses);
        this.inc({ part: "nodes" }, nodes.losses);
      },
    });
    new Counter({
      name: "shardbridge_shard_definitions_restored_total",
      help: "Shard definitions (removals too) this bridge gave back to a store that had lost them",
      registers,
      collect() {
        this.reset();
        this.inc(definitions.counts.restored);
      },
    });
  }

  /** Acquires waiting at this bridge for a lease another holds (`wait_ms`): its standbys. */
  watchLeaseWaits(waits: { readonly waiting: number }): void {
    new Gauge({
      name: "shardbridge_lease_waiting_acquires",
      help: "Acquires waiting at this bridge for a held lease (wait_ms): the standbys it answers at a change",
      registers: [this.registry],
      collect() {
        this.set(waits.waiting);
      },
    });
  }

  /**
   * Delivery to Ironic. What waits, and for how long, is the store's queue (the same on
   * every bridge: take the max across bridges, not the sum); what was delivered, retried
   * and given up, and the lag histogram, are this bridge's own.
   */
  watchIronic(delivery: IronicQueueDelivery): void {
    const registers = [this.registry];
    // One store read serves every gauge of a scrape. A store away leaves them as they were:
    // the rest of /metrics still answers (and /readyz says the store is away).
    let latest: { at: number; stats: Promise<DeliveryStats | null> } | undefined;
    let lastGood: DeliveryStats | null = null;
    const read = () => {
      if (latest === undefined || performance.now() - latest.at > 500) {
        const stats = delivery.stats().then(
          (fresh) => (lastGood = fresh),
          () => lastGood,
        );
        latest = { at: performance.now(), stats };
      }
      return latest.stats;
    };
    const stats = async () => (await read()) ?? EMPTY_STATS;
    new Gauge({
      name: "shardbridge_ironic_pending_changes",
      help: "Trait changes committed and not yet in Ironic (the store's queue)",
      registers,
      async collect() {
        this.set((await stats()).queue.pendingChanges);
      },
    });
    new Gauge({
      name: "shardbridge_ironic_oldest_pending_seconds",
      help: "How long the oldest trait change not yet in Ironic has waited (0: none waits; the store's queue)",
      registers,
      async collect() {
        this.set((await stats()).queue.oldestPendingMs / 1000);
      },
    });
    new Gauge({
      name: "shardbridge_ironic_coalesced_changes",
      help: "Trait changes folded into a node's pending record past the queue's bound (the store's, since it began)",
      registers,
      async collect() {
        this.set((await stats()).queue.coalesced);
      },
    });
    new Gauge({
      name: "shardbridge_ironic_owned_partitions",
      help: "Partitions of the Ironic queue this bridge delivers",
      registers,
      async collect() {
        this.set((await stats()).worker.partitions.length);
      },
    });
    new Counter({
      name: "shardbridge_ironic_batches_total",
      help: "One node's trait changes from one commit, by outcome (delivered, retried, given_up), by this bridge",
      labelNames: ["outcome"],
      registers,
      async collect() {
        const { delivered, retried, given_up } = (await stats()).worker;
        this.reset();
        this.inc({ outcome: "delivered" }, delivered);
        this.inc({ outcome: "retried" }, retried);
        this.inc({ outcome: "given_up" }, given_up);
      },
    });
    const lag = new Histogram({
      name: "shardbridge_ironic_delivery_seconds",
      help: "From a trait change's commit to Ironic having it (changes this bridge delivered)",
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300],
      registers,
    });
    delivery.onDelivered = (waitedMs) => lag.observe(waitedMs / 1000);
  }

  /** Count one answered request under its route pattern (never the raw path: that would be unbounded). */
  countRequest(route: string, method: string, status: number, seconds: number): void {
    this.requests.at(route, method, String(status)).inc();
    this.requestSeconds.at(route).observe(seconds);
  }

  /** Count each request express answers (see countRequest). */
  middleware(): RequestHandler {
    return (req, res, next) => {
      const started = performance.now();
      res.on("finish", () => {
        const route = req.route?.path === undefined ? "unmatched" : `${req.baseUrl}${String(req.route.path)}`;
        this.countRequest(route, req.method, res.statusCode, (performance.now() - started) / 1000);
      });
      next();
    };
  }

  routes(): DeclaredRoutes {
    const routes = new DeclaredRoutes();
    routes.serve(METRICS_OPERATIONS.metrics, async (_req, res) => {
      res.set("content-type", this.registry.contentType).send(await this.registry.metrics());
    });
    return routes;
  }
}
