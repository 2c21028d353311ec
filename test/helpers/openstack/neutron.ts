import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { answers, conf, setUp } from "./conf.js";
import type { Keystone } from "./keystone.js";
import type { TestDatabases } from "./mariadb.js";
import type { TestVhost } from "./rabbitmq.js";
import type { Service } from "./service.js";
import { openstackBin, openstackVenv } from "./venv.js";
import { serveWsgi } from "./wsgi.js";

export interface NeutronOptions {
  /** its folder: neutron.conf, logs, state */
  dir: string;
  port: number;
  /** where its database is made (`<prefix>_neutron`) */
  databases: TestDatabases;
  /** its bus (ML2 casts to agents there; none listens) */
  vhost: TestVhost;
  /** tokens are validated here (user `neutron`) */
  keystone: Keystone;
}

/**
 * neutron 29's API (neutron-server's WSGI application) on its own MariaDB database: the
 * ML2 core plugin with no mechanism driver and no agent, which is all nova asks of it for
 * servers booted with `"networks": "none"` (it lists their ports: none). Its paste pipeline
 * is neutron's own under `keystone`. Started, not yet answering: wait with
 * `service.until(() => neutronAnswers(url, token))`.
 */
export async function startNeutron({
  dir,
  port,
  databases,
  vhost,
  keystone,
}: NeutronOptions): Promise<Service> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "neutron.conf"),
    conf({
      DEFAULT: {
        core_plugin: "ml2",
        service_plugins: "",
        auth_strategy: "keystone",
        transport_url: vhost.url,
        // nova is told of port changes by neutron when there are ports; there are none here
        notify_nova_on_port_status_changes: false,
        notify_nova_on_port_data_changes: false,
        api_paste_config: join(openstackVenv(), "etc", "neutron", "api-paste.ini"),
        log_file: join(dir, "neutron.log"),
        state_path: dir,
      },
      database: { connection: databases.create("neutron") },
      keystone_authtoken: keystone.authtoken("neutron"),
      ml2: { type_drivers: "flat", tenant_network_types: "", mechanism_drivers: "", extension_drivers: "" },
      oslo_concurrency: { lock_path: join(dir, "lock") },
    }),
  );
  await setUp(
    "neutron-db-manage upgrade heads",
    openstackBin("neutron-db-manage"),
    ["--config-file", join(dir, "neutron.conf"), "upgrade", "heads"],
    join(dir, "dbsync.log"),
  );
  return serveWsgi("neutron", "neutron.wsgi.api", port, join(dir, "out.log"), {
    OS_NEUTRON_CONFIG_DIR: dir,
    OS_NEUTRON_CONFIG_FILES: "neutron.conf",
  });
}

/**
 * Whether neutron at `url` answers a list of networks. Asked before anything else: neutron
 * 29's WSGI application completes its database models at its first query, and a first
 * request that is a list of ports (nova's) fails before that ("type object 'Port' has no
 * attribute 'port_forwardings'", a 500).
 */
export function neutronAnswers(url: string, token: string): Promise<boolean> {
  return answers(`${url}/v2.0/networks`, { "x-auth-token": token });
}
