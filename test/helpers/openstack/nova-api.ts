import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../redis-server.js";
import type { OpenStackCloud } from "./cloud.js";
import { answers } from "./conf.js";
import { Service } from "./service.js";
import { openstackBin } from "./venv.js";

/**
 * nova's own api-paste.ini for the compute API (v2.1), with keystonemiddleware's
 * `authtoken` left out of the pipeline: `keystonecontext` makes the request context from
 * the X-User-Id / X-Project-Id / X-Roles headers, which `authtoken` sets from a validated
 * token and which the caller sends itself here (nova 34 has no noauth strategy any more).
 */
const PASTE = `[composite:osapi_compute]
use = call:nova.api.openstack.urlmap:urlmap_factory
/v2.1: oscomputeversion_v2
/v2.1/+: openstack_compute_api_v21

[composite:openstack_compute_api_v21]
use = call:nova.api.auth:pipeline_factory_v21
keystone = compute_req_id faultwrap keystonecontext osapi_compute_app_v21

[filter:compute_req_id]
paste.filter_factory = nova.api.compute_req_id:ComputeReqIdMiddleware.factory

[filter:faultwrap]
paste.filter_factory = nova.api.openstack:FaultWrapper.factory

[filter:keystonecontext]
paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory

[app:osapi_compute_app_v21]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[pipeline:oscomputeversion_v2]
pipeline = faultwrap oscomputeversionapp_v2

[app:oscomputeversionapp_v2]
paste.app_factory = nova.api.openstack.compute.versions:VersionsV2.factory
`;

/** nova's WSGI application (nova.wsgi.osapi_compute) served by cheroot, as a WSGI server would. */
const SERVE = `
import os, sys
sys.argv = ["nova-api"]
from nova.wsgi.osapi_compute import application
from cheroot import wsgi
wsgi.Server(("127.0.0.1", int(os.environ["NOVA_API_PORT"])), application, numthreads=4).start()
`;

/** What the tests send as the identity `authtoken` would have vouched for: an admin of a project. */
const ADMIN = { "x-user-id": "admin", "x-project-id": "admin", "x-roles": "admin,member,reader" };

export interface NovaApi {
  url: string;
  /** Call the compute API at `microversion`: its JSON answer (null when empty), or an error with nova's words. */
  call(method: string, path: string, microversion: string, body?: unknown): Promise<any>;
  stop(): Promise<void>;
}

/**
 * nova-api 34 (the compute API, v2.1) on the cloud's databases and nova.conf, in `dir`:
 * what `openstack compute service set --down` and `openstack compute service delete`
 * call, for a test that follows an operator's steps. Answering when this returns.
 */
export async function startNovaApi(cloud: OpenStackCloud, dir: string): Promise<NovaApi> {
  mkdirSync(dir, { recursive: true });
  const paste = join(dir, "api-paste.ini");
  writeFileSync(paste, PASTE);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/v2.1`;
  const service = Service.start("nova-api", openstackBin("python"), ["-c", SERVE], join(dir, "out.log"), {
    NOVA_API_PORT: String(port),
    // The paste file first: nova loads the application from the first of these.
    OS_NOVA_CONFIG_DIR: dir,
    OS_NOVA_CONFIG_FILES: `${paste};${cloud.novaConf}`,
    OS_DEFAULT__LOG_FILE: join(dir, "nova-api.log"),
    OS_DEFAULT__HOST: "nova-api",
  });
  try {
    await service.until(() => answers(`${url}/`), 120_000);
  } catch (error) {
    await service.stop();
    throw error;
  }
  return {
    url,
    call: async (method, path, microversion, body) => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: {
          ...ADMIN,
          "openstack-api-version": `compute ${microversion}`,
          "content-type": "application/json",
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`nova-api ${method} ${path}: ${res.status} ${text}`);
      return text === "" ? null : JSON.parse(text);
    },
    stop: () => service.stop(),
  };
}
