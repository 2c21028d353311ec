import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { conf, setUp } from "./conf.js";
import type { Keystone } from "./keystone.js";
import type { TestDatabases } from "./mariadb.js";
import type { Service } from "./service.js";
import { openstackBin, openstackVenv } from "./venv.js";
import { serveWsgi } from "./wsgi.js";

export interface GlanceOptions {
  /** its folder: glance-api.conf, logs, and the image store's folders (removed with it) */
  dir: string;
  port: number;
  /** where its database is made (`<prefix>_glance`) */
  databases: TestDatabases;
  /** tokens are validated here (user `glance`) */
  keystone: Keystone;
}

/**
 * glance 33 (the image API, v2) on its own MariaDB database, images in a file store under
 * `dir`. glance 33 has no server of its own ("Standalone glance-api is no longer
 * supported"): its WSGI application is served as a WSGI server would, with glance's own
 * paste pipeline under `keystone` (authtoken first). Started, not yet answering: wait with
 * `service.until(() => answers(url))`.
 */
export async function startGlance({ dir, port, databases, keystone }: GlanceOptions): Promise<Service> {
  const stores = { fs: join(dir, "images"), staging: join(dir, "staging"), tasks: join(dir, "tasks") };
  for (const folder of Object.values(stores)) mkdirSync(folder, { recursive: true });
  writeFileSync(
    join(dir, "glance-api.conf"),
    conf({
      DEFAULT: {
        log_file: join(dir, "glance-api.log"),
        enabled_backends: "fs:file",
        // the URL of this one worker (image import asks it of the worker that staged an image)
        worker_self_reference_url: `http://127.0.0.1:${port}`,
      },
      database: { connection: databases.create("glance") },
      glance_store: { default_backend: "fs" },
      fs: { filesystem_store_datadir: stores.fs },
      // glance's reserved stores for imports and tasks: folders of their own
      os_glance_staging_store: { filesystem_store_datadir: stores.staging },
      os_glance_tasks_store: { filesystem_store_datadir: stores.tasks },
      keystone_authtoken: keystone.authtoken("glance"),
      paste_deploy: {
        flavor: "keystone",
        config_file: join(openstackVenv(), "etc", "glance", "glance-api-paste.ini"),
      },
      oslo_concurrency: { lock_path: join(dir, "lock") },
    }),
  );
  await setUp(
    "glance-manage db_sync",
    openstackBin("glance-manage"),
    ["--config-file", join(dir, "glance-api.conf"), "db_sync"],
    join(dir, "dbsync.log"),
  );
  return serveWsgi("glance", "glance.wsgi.api", port, join(dir, "out.log"), { OS_GLANCE_CONFIG_DIR: dir });
}

/**
 * A public raw image of `bytes` in glance at `url`, registered and uploaded as an operator
 * does (`openstack image create --file`) with `token`: its id once glance calls it `active`.
 */
export async function registerImage(
  url: string,
  token: string,
  name: string,
  bytes: Uint8Array<ArrayBuffer>,
): Promise<string> {
  const headers = { "x-auth-token": token };
  const created = await fetch(`${url}/v2/images`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ name, disk_format: "raw", container_format: "bare", visibility: "public" }),
  });
  if (created.status !== 201)
    throw new Error(`glance: image create ${created.status} ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  const uploaded = await fetch(`${url}/v2/images/${id}/file`, {
    method: "PUT",
    headers: { ...headers, "content-type": "application/octet-stream" },
    body: bytes,
  });
  if (uploaded.status !== 204)
    throw new Error(`glance: image upload ${uploaded.status} ${await uploaded.text()}`);
  const image = (await (await fetch(`${url}/v2/images/${id}`, { headers })).json()) as { status: string };
  if (image.status !== "active") throw new Error(`glance: image ${id} is ${image.status} after its upload`);
  return id;
}
