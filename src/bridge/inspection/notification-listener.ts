import { connect, type Channel, type ChannelModel, type ConsumeMessage } from "amqplib";
import { parseOrThrow, ValidationError } from "../../core/validation.js";
import { logger } from "../../runtime/log.js";
import { InspectionData } from "../../contracts/traits.js";
import { finishOrder, inspectionTraits, type TraitRule } from "./trait-rules.js";
import type { TraitService } from "../trait-service.js";
import { finishedInspection, type FinishedInspection } from "./ironic-notification.js";
import { SIGNATURE_WINDOW_S } from "../../contracts/webhook-signature.js";
import type { InspectionDataSource } from "./watcher.js";

export interface NotificationListenerOptions {
  /** the broker Ironic sends its notifications to (`amqp://user:pass@host:5672/vhost`) */
  url: string;
  /** Ironic's control exchange (`[DEFAULT] control_exchange`, default `ironic`) */
  exchange: string;
  /** Ironic's notification topic (`[oslo_messaging_notifications] topics`, default `ironic_versioned_notifications`) */
  topic: string;
  /** the queue every bridge reads from: each notification reaches one of them */
  queue: string;
  source: InspectionDataSource;
  rules: TraitRule[];
  traits: Pick<TraitService, "applyInspection">;
  nowS?: () => number;
}

/** What the listener made of the notifications it read, by outcome (for the log and /metrics). */
export interface ListenerCounts {
  /** notifications that were not the end of an inspection */
  ignored: number;
  applied: number;
  /** this inspection, or a later one, was applied already (a second bridge, the watcher, a redelivery) */
  already: number;
  unknownNode: number;
  /** the data or the traits were refused: not retried */
  refused: number;
  noData: number;
  unreadable: number;
  /** Ironic or the store failed: tried again after a pause, the message held meanwhile */
  retries: number;
}

/** A wait before trying one message again: the store or Ironic is away, so no other would do better. */
const RETRY_MS = { first: 500, most: 30_000 };
/** How many messages the broker hands this bridge before it has acknowledged one. */
const PREFETCH = 16;

/**
 * Ironic's notifications, read from RabbitMQ: when a node leaves inspection
 * (`provision_set.end`, event `done`), its inventory is read from Ironic, the trait rules
 * run on it, and the result goes the webhook's way into the store (ownership, order by
 * the inspection's finish time, `+/-` deltas, the shard's feed, delivery to Ironic).
 *
 * Every bridge consumes one durable queue bound to Ironic's topic, so each notification
 * reaches one bridge; a message is acknowledged only once its inspection is applied (or
 * refused for good), so a bridge that dies holding one hands it to another. A repeat (a
 * redelivery, the watcher, another listener) is refused by the order already stored and
 * changes nothing. Messages are handled one after the other, in the order Ironic sent
 * them. The connection is made again, with the queue and its binding, whenever it drops.
 */
export class NotificationListener {
  readonly counts: ListenerCounts = {
    ignored: 0,
    applied: 0,
    already: 0,
    unknownNode: 0,
    refused: 0,
    noData: 0,
    unreadable: 0,
    retries: 0,
  };
  private model: ChannelModel | null = null;
  private stopped = false;
  /** the messages in hand, handled in turn */
  private turn: Promise<void> = Promise.resolve();
  private connectTimer: NodeJS.Timeout | undefined;
  private readonly nowS: () => number;

  constructor(private readonly options: NotificationListenerOptions) {
    this.nowS = options.nowS ?? (() => Date.now() / 1000);
  }

  start(): this {
    void this.connectLoop(RETRY_MS.first);
    return this;
  }

  /** Stop reading; messages not yet handled go back to the queue for another bridge. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.connectTimer);
    const model = this.model;
    this.model = null;
    await model?.close().catch(() => undefined);
  }

  private async connectLoop(waitMs: number): Promise<void> {
    if (this.stopped) return;
    const { url, exchange, topic, queue } = this.options;
    try {
      const model = await connect(url);
      if (this.stopped) return void (await model.close());
      this.model = model;
      model.on("error", (error: Error) =>
        logger.warn("ironic-notifications-error", { error: error.message }),
      );
      model.once("close", () => {
        if (this.stopped) return;
        this.model = null;
        logger.warn("ironic-notifications-disconnected", { retry_ms: RETRY_MS.first });
        this.connectTimer = setTimeout(() => void this.connectLoop(RETRY_MS.first), RETRY_MS.first);
      });
      const channel = await model.createChannel();
      // As oslo.messaging declares it: a topic exchange, not durable (declaring it otherwise
      // would be refused by the broker); the queue is ours and outlives a restart.
      await channel.assertExchange(exchange, "topic", { durable: false, autoDelete: false });
      await channel.assertQueue(queue, { durable: true });
      await channel.bindQueue(queue, exchange, `${topic}.info`);
      await channel.prefetch(PREFETCH);
      await channel.consume(queue, (message) => message !== null && this.take(channel, message));
      logger.info("ironic-notifications-listening", { exchange, routing_key: `${topic}.info`, queue });
    } catch (error) {
      const next = Math.min(RETRY_MS.most, waitMs * 2);
      logger.warn("ironic-notifications-unreachable", { error: String(error), retry_ms: next });
      this.connectTimer = setTimeout(() => void this.connectLoop(next), waitMs);
    }
  }

  private take(channel: Channel, message: ConsumeMessage): void {
    this.turn = this.turn.then(async () => {
      const done = await this.handle(message.content.toString("utf8"));
      // A message not done (the bridge stopping) goes back for another bridge.
      try {
        if (done) channel.ack(message);
        else channel.nack(message, false, true);
      } catch {
        // the channel closed meanwhile: the broker redelivers it anyway
      }
    });
  }

  /** Handle one notification to its end; false when the listener stopped first. */
  private async handle(body: string): Promise<boolean> {
    const finished = finishedInspection(body);
    if (finished === null) {
      this.counts.ignored++;
      return true;
    }
    if ("unreadable" in finished) {
      this.counts.unreadable++;
      logger.warn("ironic-notification-unreadable", { reason: finished.unreadable });
      return true;
    }
    for (let waitMs = RETRY_MS.first; ; waitMs = Math.min(RETRY_MS.most, waitMs * 2)) {
      if (this.stopped) return false;
      try {
        await this.apply(finished);
        return true;
      } catch (error) {
        this.counts.retries++;
        logger.warn("inspection-retry", { node: finished.node, error: String(error), retry_ms: waitMs });
        await new Promise((r) => setTimeout(r, waitMs));
      }
    }
  }

  /** One finished inspection into the store; throws only what may pass (Ironic or the store away). */
  private async apply({ node, finishedAt }: FinishedInspection): Promise<void> {
    const context = { node, finished_at: finishedAt, source: "ironic-notification" };
    const data = await this.options.source.fetch(node);
    if (data === null) {
      this.counts.noData++;
      logger.warn("inspection-no-data", context);
      return;
    }
    let order: number;
    let desired: string[];
    try {
      order = finishOrder(finishedAt, this.nowS(), SIGNATURE_WINDOW_S);
      desired = inspectionTraits(parseOrThrow(InspectionData, data), this.options.rules);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      this.counts.refused++;
      logger.warn("inspection-refused", { ...context, reason: error.message });
      return;
    }
    const outcome = await this.options.traits.applyInspection(node, order, desired);
    switch (outcome.kind) {
      case "applied":
        this.counts.applied++;
        logger.info("inspection-applied", {
          ...context,
          applied: outcome.applied,
          generation: outcome.generation,
        });
        return;
      case "stale":
      case "replayed":
        this.counts.already++;
        logger.info("inspection-already-applied", context);
        return;
      case "unknown_node":
        // Not retried: the bridge learns nodes from ironic-sync; the watcher's polls or the
        // node's next inspection bring the result once it knows the node.
        this.counts.unknownNode++;
        logger.warn("inspection-unknown-node", context);
        return;
      case "refused":
        this.counts.refused++;
        logger.warn("inspection-refused", { ...context, problems: outcome.problems });
        return;
    }
  }
}
