import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../redis-server.js";
import type { OpenStackCloud } from "./cloud.js";
import { answers } from "./conf.js";
import type { Service } from "./service.js";
import { openstackVenv } from "./venv.js";
import { serveWsgi } from "./wsgi.js";

export interface NovaApi {
  url: string;
  /** nova-api's log (oslo.log's format: readNovaLog reads it) */
  log: string;
  /**
   * Call the compute API at `microversion` as the cloud's admin (a token of project admin,
   * validated by nova's authtoken): its JSON answer (null when empty), or an error with
   * nova's words.
   */
  call(method: string, path: string, microversion: string, body?: unknown): Promise<any>;
  /** The same call's status and text, whatever they are (a refusal is an answer to read). */
  send(
    method: string,
    path: string,
    microversion: string,
    body?: unknown,
  ): Promise<{ status: number; text: string }>;
  service: Service;
  stop(): Promise<void>;
}

/**
 * nova-api 34 (the compute API, v2.1: nova.wsgi.osapi_compute) on the cloud's databases and
 * nova.conf, in `dir`, behind nova's own paste pipeline (its api-paste.ini, `authtoken`
 * first: the caller's token validated by keystone, its catalog handed on to glance and
 * neutron). On `port`, or one found free. Answering when this returns.
 */
export async function startNovaApi(
  cloud: Pick<OpenStackCloud, "novaConf" | "keystone">,
  dir: string,
  port?: number,
): Promise<NovaApi> {
  mkdirSync(dir, { recursive: true });
  const listen = port ?? (await freePort());
  const url = `http://127.0.0.1:${listen}/v2.1`;
  const log = join(dir, "nova-api.log");
  const service = serveWsgi("nova-api", "nova.wsgi.osapi_compute", listen, join(dir, "out.log"), {
    // The paste file first: nova loads the application from the first of these.
    OS_NOVA_CONFIG_DIR: dir,
    OS_NOVA_CONFIG_FILES: `${join(openstackVenv(), "etc", "nova", "api-paste.ini")};${cloud.novaConf}`,
    OS_DEFAULT__LOG_FILE: log,
    OS_DEFAULT__HOST: "nova-api",
  });
  try {
    await service.until(() => answers(`${url}/`), 120_000);
  } catch (error) {
    await service.stop();
    throw error;
  }
  const send = async (method: string, path: string, microversion: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        "x-auth-token": await cloud.keystone.adminToken("project"),
        "openstack-api-version": `compute ${microversion}`,
        "content-type": "application/json",
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: res.status, text: await res.text() };
  };
  return {
    url,
    log,
    send,
    call: async (method, path, microversion, body) => {
      const { status, text } = await send(method, path, microversion, body);
      if (status >= 400) throw new Error(`nova-api ${method} ${path}: ${status} ${text}`);
      return text === "" ? null : JSON.parse(text);
    },
    service,
    stop: () => service.stop(),
  };
}
