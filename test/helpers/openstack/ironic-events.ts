import { connect, type ChannelModel } from "amqplib";
import type { TestVhost } from "./rabbitmq.js";

/** One notification Ironic sent about a node, as it sent it. */
export interface IronicEvent {
  /** when this process read it (ms of the epoch) */
  seenAt: number;
  /** Ironic's own time of the notification (ms of the epoch) */
  at: number;
  /** `baremetal.node.power_set.end`, `baremetal.node.provision_set.success`, ... */
  type: string;
  node: string;
  /** a power action's target: `power on`, `power off`, `rebooting`, ... (power_set only) */
  toPower: string | null;
  powerState: string | null;
  provisionState: string | null;
  instanceUuid: string | null;
}

/** Ironic's control exchange and notification topic (its defaults, which the cloud keeps). */
const EXCHANGE = "ironic";
const TOPIC = "ironic_versioned_notifications";

/**
 * Ironic's own record of what it did to each node: every versioned notification it sends
 * (the cloud's Ironic sends them at `info`), read from a queue of this recorder's own bound
 * to Ironic's topic, so no other reader takes one from it. A power action Ironic carried
 * out is one `baremetal.node.power_set.end` (its `to_power` says which); one it failed, a
 * `power_set.error`.
 */
export class IronicEvents {
  readonly events: IronicEvent[] = [];

  private constructor(private readonly model: ChannelModel) {}

  static async record(vhost: TestVhost): Promise<IronicEvents> {
    const model = await connect(vhost.amqpUrl);
    const recorder = new IronicEvents(model);
    const channel = await model.createChannel();
    // As oslo.messaging declares it: a topic exchange, not durable.
    await channel.assertExchange(EXCHANGE, "topic", { durable: false, autoDelete: false });
    const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
    for (const level of ["info", "error"]) await channel.bindQueue(queue, EXCHANGE, `${TOPIC}.${level}`);
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return;
        const envelope = JSON.parse(message.content.toString()) as { "oslo.message"?: string };
        const body = JSON.parse(envelope["oslo.message"] ?? message.content.toString()) as {
          event_type: string;
          timestamp: string;
          payload: { "ironic_object.data"?: Record<string, unknown> };
        };
        const node = body.payload["ironic_object.data"];
        if (node === undefined || typeof node.uuid !== "string") return;
        const text = (field: string) => (typeof node[field] === "string" ? node[field] : null);
        recorder.events.push({
          seenAt: Date.now(),
          // oslo.messaging's timestamp: UTC, without a zone
          at: Date.parse(`${body.timestamp.replace(" ", "T")}Z`),
          type: body.event_type,
          node: node.uuid,
          toPower: text("to_power"),
          powerState: text("power_state"),
          provisionState: text("provision_state"),
          instanceUuid: text("instance_uuid"),
        });
      },
      { noAck: true },
    );
    return recorder;
  }

  /** The power actions Ironic finished on `node` (or failed: `power_set.error`) since `since` (ms of the epoch, Ironic's time). */
  powerActions(node: string, since: number): IronicEvent[] {
    return this.events.filter(
      (e) =>
        e.node === node &&
        e.at >= since &&
        (e.type === "baremetal.node.power_set.end" || e.type === "baremetal.node.power_set.error"),
    );
  }

  async stop(): Promise<void> {
    await this.model.close();
  }
}
