import { mkdirSync, openSync, readSync, closeSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { answers, conf, setUp } from "./conf.js";
import type { Keystone } from "./keystone.js";
import type { TestDatabases } from "./mariadb.js";
import type { TestVhost } from "./rabbitmq.js";
import { Service } from "./service.js";
import { openstackBin } from "./venv.js";

/** What Ironic 39 answers to (its newest microversion is 1.115; 1.82 brought shards); a token goes beside them. */
export const IRONIC_HEADERS = {
  "x-openstack-ironic-api-version": "1.115",
  "content-type": "application/json",
};

export interface IronicOptions {
  /** its folder: ironic.conf, logs, state */
  dir: string;
  port: number;
  /** where its database is made (`<prefix>_ironic`) */
  databases: TestDatabases;
  /** its notifications go here */
  vhost: TestVhost;
  /** the conductor's `[DEFAULT] host` */
  host: string;
  /** validate tokens with this keystone (user `ironic`); noauth without */
  keystone?: Keystone;
  /** sections and options added to (or replacing) the defaults below */
  extra?: Record<string, Record<string, string | number | boolean>>;
  /** environment of the process (PYTHONPATH for a hook, say) */
  env?: NodeJS.ProcessEnv;
}

/**
 * Ironic 39 in one process (API and conductor), no RPC bus: fake-hardware, the built-in
 * `agent` inspection, versioned notifications (info) to `vhost`; its database made and
 * synced. With `keystone`, tokens are validated there (keystonemiddleware) and the
 * `service` role of project `service` is a service's, as Ironic's secure RBAC has it for
 * nova (`rbac_service_role_elevated_access`); the system admin is Ironic's admin. Started,
 * not yet answering: wait with `service.until(() => ironicAnswers(url, headers))`.
 */
export async function startIronic({
  dir,
  port,
  databases,
  vhost,
  host,
  keystone,
  extra = {},
  env = {},
}: IronicOptions): Promise<Service> {
  mkdirSync(join(dir, "tmp"), { recursive: true });
  const ironicConf = join(dir, "ironic.conf");
  const sections: Record<string, Record<string, string | number | boolean>> = {
    DEFAULT: {
      auth_strategy: keystone === undefined ? "noauth" : "keystone",
      ...(keystone !== undefined && { rbac_service_role_elevated_access: true }),
      rpc_transport: "none",
      host,
      log_file: ironicLogIn(dir),
      state_path: dir,
      tempdir: join(dir, "tmp"),
      enabled_hardware_types: "fake-hardware",
      enabled_bios_interfaces: "fake,no-bios",
      enabled_boot_interfaces: "fake",
      enabled_console_interfaces: "fake,no-console",
      enabled_deploy_interfaces: "fake",
      enabled_inspect_interfaces: "agent,fake,no-inspect",
      enabled_management_interfaces: "fake",
      enabled_network_interfaces: "noop",
      enabled_power_interfaces: "fake",
      enabled_raid_interfaces: "fake,no-raid",
      enabled_rescue_interfaces: "fake,no-rescue",
      enabled_storage_interfaces: "noop",
      enabled_vendor_interfaces: "fake,no-vendor",
      default_network_interface: "noop",
      notification_level: "info",
    },
    api: { host_ip: "127.0.0.1", port, api_workers: 1 },
    conductor: { automated_clean: false },
    database: { connection: databases.create("ironic") },
    dhcp: { dhcp_provider: "none" },
    // fake-hardware's boot interface cannot validate a managed boot; the test plays the ramdisk.
    inspector: { require_managed_boot: false },
    oslo_concurrency: { lock_path: join(dir, "tmp") },
    oslo_messaging_notifications: { driver: "messagingv2", transport_url: vhost.url },
    ...(keystone !== undefined && { keystone_authtoken: keystone.authtoken("ironic") }),
  };
  for (const [name, options] of Object.entries(extra)) sections[name] = { ...sections[name], ...options };
  writeFileSync(ironicConf, conf(sections));
  await setUp(
    "ironic-dbsync",
    openstackBin("ironic-dbsync"),
    ["--config-file", ironicConf, "create_schema"],
    join(dir, "dbsync.log"),
  );
  return Service.start(
    "ironic",
    openstackBin("ironic"),
    ["--config-file", ironicConf],
    join(dir, "out.log"),
    env,
  );
}

/** Whether the Ironic at `url` answers (its fake-hardware driver is loaded); `headers` with a token under keystone. */
export function ironicAnswers(
  url: string,
  headers: Record<string, string> = IRONIC_HEADERS,
): Promise<boolean> {
  return answers(`${url}/v1/drivers/fake-hardware`, headers);
}

/** The log of the Ironic that startIronic runs in `dir`. */
export const ironicLogIn = (dir: string) => join(dir, "ironic.log");

/** How far Ironic's log is written now: where a later `ironicPowerChanges` starts reading. */
export const ironicLogMark = (logFile: string) => statSync(logFile).size;

/**
 * The power changes Ironic's conductor carried out on `node` since `mark`, in order, from
 * its own log. It logs "Node N current power state is 'A', requested state is 'B'." (INFO)
 * only once it has decided to change the power; a request for the state the node is
 * already in ends without that line, yet with a `power_set.end` notification like a
 * change's (ironic.conductor.utils `_can_skip_state_change`, Ironic 39).
 */
export function ironicPowerChanges(logFile: string, node: string, mark: number): Array<[string, string]> {
  const line = new RegExp(`Node ${node} current power state is '([^']+)', requested state is '([^']+)'`, "g");
  return [...ironicLogSince(logFile, mark).matchAll(line)].map((m) => [m[1]!, m[2]!]);
}

/** What Ironic wrote to its log since `mark` (an `ironicLogMark`). */
export function ironicLogSince(logFile: string, mark: number): string {
  const size = statSync(logFile).size;
  const bytes = Buffer.alloc(Math.max(0, size - mark));
  const fd = openSync(logFile, "r");
  try {
    readSync(fd, bytes, 0, bytes.length, mark);
  } finally {
    closeSync(fd);
  }
  return bytes.toString("utf8");
}
