import { spawnSync } from "node:child_process";

function rabbitmqctl(args: string[]): void {
  const run = spawnSync("rabbitmqctl", args, { encoding: "utf8", timeout: 60_000 });
  if (run.error !== undefined) throw new Error(`rabbitmqctl: ${run.error.message}`);
  if (run.status !== 0) throw new Error(`rabbitmqctl ${args.join(" ")}: ${run.stderr.trim()}`);
}

/**
 * A RabbitMQ virtual host of this run's own on the machine's broker (guest/guest on
 * loopback), so nova's RPC queues and Ironic's notifications meet nobody else's. `remove`
 * deletes it and everything in it.
 */
export class TestVhost {
  private constructor(readonly name: string) {}

  static create(name: string): TestVhost {
    rabbitmqctl(["add_vhost", name]);
    rabbitmqctl(["set_permissions", "-p", name, "guest", ".*", ".*", ".*"]);
    return new TestVhost(name);
  }

  get url(): string {
    return `rabbit://guest:guest@127.0.0.1:5672/${encodeURIComponent(this.name)}`;
  }

  /** The same vhost for an AMQP client (amqp://). */
  get amqpUrl(): string {
    return `amqp://guest:guest@127.0.0.1:5672/${encodeURIComponent(this.name)}`;
  }

  remove(): void {
    rabbitmqctl(["delete_vhost", this.name]);
  }
}
