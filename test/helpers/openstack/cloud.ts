import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../redis-server.js";
import { mariadbRows, TestDatabases } from "./mariadb.js";
import { TestVhost } from "./rabbitmq.js";
import { answers, conf, setUp } from "./conf.js";
import { registerImage, startGlance } from "./glance.js";
import { IRONIC_HEADERS, ironicAnswers, ironicLogIn, startIronic } from "./ironic.js";
import { Keystone } from "./keystone.js";
import { neutronAnswers, startNeutron } from "./neutron.js";
import { startNovaApi, type NovaApi } from "./nova-api.js";
import { Service } from "./service.js";
import { openstackBin } from "./venv.js";

export { IRONIC_HEADERS };
/** What placement 16 answers to; an admin's token (project-scoped: placement's policies are) goes beside it. */
const PLACEMENT_HEADERS = { "openstack-api-version": "placement latest" };

/**
 * The periodic at which nova-compute reports its nodes (nova's default is 60 s; what an
 * operator may set). The tests wait for reports, so a shorter one shortens every case.
 */
export const NOVA_UPDATE_INTERVAL_S = 10;

/** A compute service record, as nova-conductor wrote it in nova's cell database. */
export interface NovaService {
  id: number;
  host: string;
  binary: string;
  uuid: string;
  deleted: boolean;
  forcedDown: boolean;
  reportCount: number;
  updatedAt: string | null;
}

/** A compute node record of nova's cell database. */
export interface NovaComputeNode {
  id: number;
  uuid: string;
  host: string;
  hypervisorHostname: string;
  deleted: boolean;
  createdAt: string;
}

/** A resource provider as placement's database holds it. */
export interface PlacementProvider {
  /** placement's row id: a provider deleted and made again under the same uuid has a new one */
  id: number;
  uuid: string;
  generation: number;
}

/** An instance record of nova's cell database (deleted ones too). */
export interface NovaInstance {
  id: number;
  uuid: string;
  host: string | null;
  /** for Ironic, the node's uuid */
  node: string | null;
  vmState: string;
  taskState: string | null;
  /** nova's power state: 1 running, 4 shutdown, 0 nostate */
  powerState: number | null;
  deleted: boolean;
  createdAt: string;
  launchedAt: string | null;
}

/**
 * A private OpenStack of today's releases on this machine: keystone 30 (Fernet tokens, a
 * service user for nova, Ironic, placement, glance, neutron and shardbridge, the catalog),
 * Ironic 39 (API and conductor in one process, fake-hardware, built-in `agent` inspection,
 * notifications to RabbitMQ), placement 16, nova-conductor 34, each on its own MariaDB
 * database and the run's own RabbitMQ vhost; Ironic and placement validate real keystone
 * tokens. nova-compute is not started here: a test runs it (under `shardbridge run`) with
 * `novaConf`, the lines an operator writes for it.
 */
export interface OpenStackCloud {
  ironic: string;
  placement: string;
  /** the identity service every other one validates tokens with */
  keystone: Keystone;
  /**
   * The environment of a shardbridge that calls Ironic itself (serve --ironic, ironic-sync):
   * OS_AUTH_URL and an application credential of its own keystone user (`shardbridge`,
   * role `service` on project `service`), as an operator would give it.
   */
  bridgeEnv: Record<string, string>;
  /** Ironic's microversion and a system admin's token (kept, renewed), for the tests' own calls */
  ironicHeaders(): Promise<Record<string, string>>;
  vhost: TestVhost;
  dir: string;
  /** nova.conf for nova-compute: driver, bus, placement; [ironic] left to the environment (run) */
  novaConf: string;
  /** nova's compute service records (deleted ones too) */
  novaServices(): NovaService[];
  /** nova's compute node records (deleted ones too) */
  novaComputeNodes(): NovaComputeNode[];
  /** GET a placement path: its JSON */
  placementGet(path: string): Promise<any>;
  /** placement's resource provider records, read from its database */
  placementProviders(): PlacementProvider[];
  /** nova-compute's log lines (every process that ran with `novaConf`) */
  novaComputeLog: string;
  /** Ironic's log (its API and conductor, one process) */
  ironicLog: string;
  /** nova-manage on `novaConf`, to its end: its output, or an error with its exit code and words */
  novaManage(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A cloud that boots instances on Ironic's nodes, as nova does for an operator: the cloud
 * above, and nova-api (the compute API behind keystone's authtoken), nova-scheduler
 * (placement's allocation candidates), glance 33 (one small image in a file store) and
 * neutron 29 (ML2, no agents: servers boot with `"networks": "none"`, and nova still asks
 * neutron for their ports); Ironic tells nova of power changes (`[nova]`, as deployed).
 */
export interface BootingCloud extends OpenStackCloud {
  /** the compute API, called as the cloud's admin */
  compute: NovaApi;
  glance: string;
  neutron: string;
  /** the image servers boot from (glance's id) */
  image: string;
  /** `nova-manage cell_v2 discover_hosts --by-service`: map the compute services that registered */
  discoverHosts(): Promise<void>;
  /** nova's instance records (deleted ones too) */
  novaInstances(): NovaInstance[];
}

const execFileAsync = promisify(execFile);

async function novaManage(novaConf: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(
      openstackBin("nova-manage"),
      ["--config-file", novaConf, ...args],
      {
        encoding: "utf8",
      },
    );
    return stdout;
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    throw new Error(
      `nova-manage ${args.join(" ")}: exit ${e.code}: ${e.stdout ?? ""}${(e.stderr ?? "").slice(-1500)}`,
    );
  }
}

export function startCloud(): Promise<OpenStackCloud>;
export function startCloud(options: { boot: true }): Promise<BootingCloud>;
export async function startCloud({ boot = false }: { boot?: boolean } = {}): Promise<
  OpenStackCloud | BootingCloud
> {
  const run = `sbt_${process.pid}_${randomBytes(3).toString("hex")}`;
  const dir = mkdtempSync(join(tmpdir(), "sb-openstack-"));
  const databases = new TestDatabases(run);
  let vhost: TestVhost | null = null;
  const services: Service[] = [];
  const stop = async () => {
    for (const service of services.reverse()) await service.stop();
    databases.drop();
    vhost?.remove();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    vhost = TestVhost.create(run);
    const [keystonePort, ironicPort, placementPort] = [await freePort(), await freePort(), await freePort()];
    const ironic = `http://127.0.0.1:${ironicPort}`;
    const placement = `http://127.0.0.1:${placementPort}`;
    const keystone = new Keystone({ dir: join(dir, "keystone"), port: keystonePort, databases });
    // The services only a cloud that boots runs: where each will answer.
    const [glancePort, neutronPort, computePort] = [await freePort(), await freePort(), await freePort()];
    const glance = `http://127.0.0.1:${glancePort}`;
    const neutron = `http://127.0.0.1:${neutronPort}`;
    const compute = `http://127.0.0.1:${computePort}/v2.1`;

    // Each service's set-up (database sync, start) runs beside the others'; each one's
    // files name the keystone users it authenticates as, made once keystone is up.
    const keystoneUp = (async () => {
      try {
        await keystone.start();
      } finally {
        if (keystone.service !== null) services.push(keystone.service);
      }
      await keystone.populate({
        baremetal: ironic,
        placement,
        ...(boot && { image: glance, network: neutron, compute }),
      });
    })();

    // Ironic 39: one process (API + conductor), no RPC bus, notifications on the vhost.
    const ironicDir = join(dir, "ironic");
    const ironicUp = startIronic({
      dir: ironicDir,
      port: ironicPort,
      databases,
      vhost,
      host: `${run}-conductor`,
      keystone,
      // Power changes of a node with an instance reach nova (os-server-external-events), as
      // a deployed Ironic is set up to; a cloud without nova-api has none to tell.
      ...(boot && {
        extra: { nova: { send_power_notifications: true, ...keystone.passwordAuth("ironic") } },
      }),
    }).then((service) => {
      services.push(service);
      return service;
    });

    // placement 16 under cheroot (an Ironic dependency, so pinned with it), tokens from keystone.
    mkdirSync(join(dir, "placement"));
    writeFileSync(
      join(dir, "placement", "placement.conf"),
      conf({
        DEFAULT: { log_file: join(dir, "placement", "placement.log") },
        api: { auth_strategy: "keystone" },
        keystone_authtoken: keystone.authtoken("placement"),
        placement_database: { connection: databases.create("placement") },
      }),
    );
    const placementUp = setUp(
      "placement-manage db sync",
      openstackBin("placement-manage"),
      ["--config-file", join(dir, "placement", "placement.conf"), "db", "sync"],
      join(dir, "placement", "dbsync.log"),
    ).then(() => {
      const service = Service.start(
        "placement",
        openstackBin("cheroot"),
        ["--bind", `127.0.0.1:${placementPort}`, "--threads", "4", "placement.wsgi.api:application"],
        join(dir, "placement", "out.log"),
        { OS_PLACEMENT_CONFIG_DIR: join(dir, "placement") },
      );
      services.push(service);
      return service;
    });

    // nova 34: its API database, cell0 and cell1, and one conductor.
    mkdirSync(join(dir, "nova", "log"), { recursive: true });
    const novaConf = join(dir, "nova", "nova.conf");
    const cell0 = databases.create("nova_cell0");
    writeFileSync(
      novaConf,
      conf({
        DEFAULT: {
          compute_driver: "ironic.IronicDriver",
          transport_url: vhost.url,
          log_dir: join(dir, "nova", "log"),
          state_path: join(dir, "nova"),
          report_interval: 10,
          service_down_time: 60,
          update_resources_interval: NOVA_UPDATE_INTERVAL_S,
          // oslo.log's default format carries each line's pid: the tests tell old from new by it.
          debug: true,
          default_log_levels: "amqp=WARN,amqplib=WARN,urllib3=WARN,stevedore=WARN",
        },
        api_database: { connection: databases.create("nova_api") },
        database: { connection: databases.create("nova") },
        conductor: { workers: 1 },
        oslo_concurrency: { lock_path: join(dir, "nova", "lock") },
        // nova's service user, as an operator's nova.conf has it: placement from the catalog.
        placement: keystone.passwordAuth("nova"),
        // The same user for Ironic; the endpoint comes from `shardbridge run`
        // (OS_IRONIC__ENDPOINT_OVERRIDE): the fenced one.
        // Retried as the examples' nova.conf has it (a 409 or 503: NodeLocked, the fence's).
        ironic: { ...keystone.passwordAuth("nova"), status_code_retries: 5, status_code_retry_delay: 1 },
        // nova-api validates its callers' tokens (its paste pipeline's authtoken).
        keystone_authtoken: keystone.authtoken("nova"),
        // nova-compute lists an instance's ports as nova's service user (its admin client).
        ...(boot && { neutron: keystone.passwordAuth("nova") }),
        // One scheduler process; among nodes of equal weight a random one, as nova advises
        // for Ironic, so boots sent together do not all claim the same node first.
        ...(boot && {
          scheduler: { workers: 1 },
          filter_scheduler: { shuffle_best_same_weighed_hosts: true },
        }),
      }),
    );
    const novaUp = (async () => {
      const manage = (args: string[]) =>
        setUp(
          `nova-manage ${args.join(" ")}`,
          openstackBin("nova-manage"),
          ["--config-file", novaConf, ...args],
          join(dir, "nova", "manage.log"),
        );
      await manage(["api_db", "sync"]);
      await manage(["cell_v2", "map_cell0", "--database_connection", cell0]);
      await manage(["cell_v2", "create_cell", "--name", "cell1"]);
      await manage(["db", "sync"]);
      for (const binary of boot ? ["nova-conductor", "nova-scheduler"] : ["nova-conductor"])
        services.push(
          Service.start(
            binary,
            openstackBin(binary),
            ["--config-file", novaConf],
            join(dir, "nova", `${binary.slice("nova-".length)}.out`),
            { OS_DEFAULT__HOST: `${run}-${binary.slice("nova-".length)}` },
          ),
        );
      if (!boot) return null;
      const api = await startNovaApi({ novaConf, keystone }, join(dir, "nova", "api"), computePort);
      services.push(api.service);
      return api;
    })();

    // glance and neutron, each on its own database, tokens from keystone.
    const glanceUp = !boot
      ? null
      : startGlance({ dir: join(dir, "glance"), port: glancePort, databases, keystone }).then((service) => {
          services.push(service);
          return service;
        });
    const neutronUp = !boot
      ? null
      : startNeutron({ dir: join(dir, "neutron"), port: neutronPort, databases, vhost, keystone }).then(
          (service) => {
            services.push(service);
            return service;
          },
        );

    // Every set-up ended (none left running into `stop`), the first failure thrown.
    const settled = await Promise.allSettled([
      keystoneUp,
      ironicUp,
      placementUp,
      novaUp,
      glanceUp,
      neutronUp,
    ]);
    for (const s of settled) if (s.status === "rejected") throw s.reason;
    const [ironicService, placementService] = [await ironicUp, await placementUp];
    const ironicHeaders = async () => ({
      ...IRONIC_HEADERS,
      "x-auth-token": await keystone.adminToken("system"),
    });
    const placementHeaders = async () => ({
      ...PLACEMENT_HEADERS,
      "x-auth-token": await keystone.adminToken("project"),
    });
    const [bridgeEnv] = await Promise.all([
      keystone.applicationCredential("shardbridge", `shardbridge-${run}`),
      ironicService.until(async () => ironicAnswers(ironic, await ironicHeaders()), 90_000),
      placementService.until(
        async () => answers(`${placement}/resource_providers`, await placementHeaders()),
        60_000,
      ),
    ]);
    const novaDb = databases.name("nova");
    const placementDb = databases.name("placement");
    const common: OpenStackCloud = {
      ironic,
      placement,
      keystone,
      bridgeEnv,
      ironicHeaders,
      vhost,
      dir,
      novaConf,
      novaComputeLog: join(dir, "nova", "log", "nova-compute.log"),
      ironicLog: ironicLogIn(ironicDir),
      novaManage: (...args) => novaManage(novaConf, args),
      novaServices: () =>
        mariadbRows(
          "SELECT id, host, `binary`, uuid, deleted, forced_down, report_count, updated_at FROM services WHERE `binary` = 'nova-compute' ORDER BY id",
          novaDb,
        ).map(([id, host, binary, uuid, deleted, forcedDown, reportCount, updatedAt]) => ({
          id: Number(id),
          host: host!,
          binary: binary!,
          uuid: uuid!,
          deleted: deleted !== "0",
          forcedDown: forcedDown === "1",
          reportCount: Number(reportCount),
          updatedAt: updatedAt ?? null,
        })),
      novaComputeNodes: () =>
        mariadbRows(
          "SELECT id, uuid, host, hypervisor_hostname, deleted, created_at FROM compute_nodes ORDER BY id",
          novaDb,
        ).map(([id, uuid, host, hypervisorHostname, deleted, createdAt]) => ({
          id: Number(id),
          uuid: uuid!,
          host: host!,
          hypervisorHostname: hypervisorHostname!,
          deleted: deleted !== "0",
          createdAt: createdAt!,
        })),
      placementGet: async (path) => {
        const res = await fetch(`${placement}${path}`, { headers: await placementHeaders() });
        if (!res.ok) throw new Error(`placement GET ${path}: ${res.status} ${await res.text()}`);
        return res.json();
      },
      placementProviders: () =>
        mariadbRows("SELECT id, uuid, generation FROM resource_providers ORDER BY id", placementDb).map(
          ([id, uuid, generation]) => ({ id: Number(id), uuid: uuid!, generation: Number(generation) }),
        ),
      stop,
    };
    const api = await novaUp;
    if (!boot || api === null) return common;
    const token = await keystone.adminToken("project");
    await Promise.all([
      (await glanceUp)!.until(() => answers(`${glance}/versions`), 60_000),
      (await neutronUp)!.until(() => neutronAnswers(neutron, token), 60_000),
    ]);
    const booting: BootingCloud = {
      ...common,
      compute: api,
      glance,
      neutron,
      // A few bytes are a whole image to a fake deploy, which never writes one to a disk.
      image: await registerImage(
        glance,
        token,
        "bm-image",
        new TextEncoder().encode("shardbridge test image\n"),
      ),
      discoverHosts: () =>
        setUp(
          "nova-manage cell_v2 discover_hosts",
          openstackBin("nova-manage"),
          ["--config-file", novaConf, "cell_v2", "discover_hosts", "--by-service"],
          join(dir, "nova", "manage.log"),
        ),
      novaInstances: () =>
        mariadbRows(
          "SELECT id, uuid, host, node, vm_state, task_state, power_state, deleted, created_at, launched_at FROM instances ORDER BY id",
          novaDb,
        ).map(([id, uuid, host, node, vmState, taskState, powerState, deleted, createdAt, launchedAt]) => ({
          id: Number(id),
          uuid: uuid!,
          host: host ?? null,
          node: node ?? null,
          vmState: vmState!,
          taskState: taskState ?? null,
          powerState: powerState == null ? null : Number(powerState),
          deleted: deleted !== "0",
          createdAt: createdAt!,
          launchedAt: launchedAt ?? null,
        })),
    };
    return booting;
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Call the cloud's Ironic API (with the admin's token), or any Ironic's — `{ ironic: URL }`
 * of a test's own, under noauth: its JSON answer (null when empty), or an error with
 * Ironic's words.
 */
export async function ironicApi(
  cloud: Pick<OpenStackCloud, "ironic"> & Partial<Pick<OpenStackCloud, "ironicHeaders">>,
  method: string,
  path: string,
  body?: unknown,
): Promise<any> {
  const res = await fetch(`${cloud.ironic}${path}`, {
    method,
    headers: cloud.ironicHeaders === undefined ? IRONIC_HEADERS : await cloud.ironicHeaders(),
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`Ironic ${method} ${path}: ${res.status} ${text}`);
  return text === "" ? null : JSON.parse(text);
}

let shared: Promise<OpenStackCloud> | null = null;

/** One cloud for every suite of the run that needs one (started on first use, stopped by the root hook). */
export function sharedCloud(): Promise<OpenStackCloud> {
  shared ??= startCloud();
  return shared;
}

export async function stopSharedCloud(): Promise<void> {
  if (shared === null) return;
  const cloud = await shared.catch(() => null);
  shared = null;
  await cloud?.stop();
}
