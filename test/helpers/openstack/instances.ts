import { ironicApi, type BootingCloud, type NovaInstance } from "./cloud.js";
import { until } from "../until.js";

/** The compute API's version the tests speak: `"networks": "none"` (2.37), a node asked for by name (2.74), events' details (2.84). */
export const MICROVERSION = "2.90";
/** The nodes' resource class (enrollAvailable's `baremetal`), as placement names it. */
export const RESOURCE_CLASS = "CUSTOM_BAREMETAL";
/**
 * How long an action nova accepted may take to finish once a nova-compute that can do it
 * runs: a deadline that says "never", not a measure (nova's ironic driver itself waits up
 * to 120 s for a power state: [ironic] api_max_retries x api_retry_interval).
 */
export const ACTION_DEADLINE_MS = 120_000;

/** A server as the compute API shows it to an admin. */
export interface ServerView {
  id: string;
  status: string;
  host: string | null;
  node: string | null;
  vmState: string;
  taskState: string | null;
  powerState: number;
  created: string;
  launchedAt: string | null;
  /** nova's word on an ERROR: why (absent otherwise) */
  fault?: string;
}

/** One event of an instance action, as nova recorded it. */
export interface ActionEvent {
  event: string;
  result: string | null;
  details?: string;
}

/** Ironic's node as it concerns an instance: who it is deployed for, and its states. */
export interface IronicNodeView {
  uuid: string;
  instance: string | null;
  provision: string;
  power: string | null;
}

/** Every record of one server: the compute API's, nova's database row, placement's allocations, Ironic's node. */
export interface InstanceRecords {
  api: ServerView;
  db: NovaInstance;
  allocations: Record<string, Record<string, number>>;
  ironic: IronicNodeView;
}

/** Whether nova carried out this reboot: its compute event says `Success`. */
export const rebootSucceeded = (reboot: { events: ActionEvent[] }) =>
  reboot.events.some((e) => e.event === "compute_reboot_instance" && e.result === "Success");

/** Settled: no task under way. */
export const settled = (status: string) => (s: ServerView) => s.status === status && s.taskState === null;

/**
 * The servers of a booting cloud, as its admin sees and drives them through the compute
 * API, and as nova's database, placement and Ironic record them.
 */
export class Instances {
  constructor(private readonly cloud: BootingCloud) {}

  async server(id: string): Promise<ServerView> {
    const { server: s } = await this.cloud.compute.call("GET", `/servers/${id}`, MICROVERSION);
    return {
      id: s.id,
      status: s.status,
      host: s["OS-EXT-SRV-ATTR:host"],
      node: s["OS-EXT-SRV-ATTR:hypervisor_hostname"],
      vmState: s["OS-EXT-STS:vm_state"],
      taskState: s["OS-EXT-STS:task_state"],
      powerState: s["OS-EXT-STS:power_state"],
      created: s.created,
      launchedAt: s["OS-SRV-USG:launched_at"],
      ...(s.fault !== undefined && { fault: `${s.fault.message} ${s.fault.details ?? ""}`.slice(0, 2000) }),
    };
  }

  /** Poll the server every 100 ms until `done` holds, within ACTION_DEADLINE_MS; an ERROR fails at once, with nova's fault. */
  untilServer(id: string, what: string, done: (s: ServerView) => boolean): Promise<ServerView> {
    return until(
      `server ${id} ${what}`,
      async () => {
        const s = await this.server(id);
        if (s.status === "ERROR") throw new Error(`server ${id} went ERROR (not ${what}): ${s.fault}`);
        return s;
      },
      done,
      ACTION_DEADLINE_MS,
      100,
    );
  }

  /**
   * A baremetal flavor as operators make one: one node of RESOURCE_CLASS, nothing of the
   * standard classes. Its id.
   */
  async baremetalFlavor(name = "bm.baremetal"): Promise<string> {
    const { flavor } = await this.cloud.compute.call("POST", "/flavors", MICROVERSION, {
      flavor: { name, vcpus: 1, ram: 1024, disk: 10 },
    });
    await this.cloud.compute.call("POST", `/flavors/${flavor.id}/os-extra_specs`, MICROVERSION, {
      extra_specs: {
        [`resources:${RESOURCE_CLASS}`]: "1",
        "resources:VCPU": "0",
        "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0",
      },
    });
    return flavor.id as string;
  }

  /** Boot a server of `flavor` and the cloud's image, without networks (`node`: on that node, by name, 2.74); its id. */
  async boot(name: string, flavor: string, node?: string): Promise<string> {
    const { server: s } = await this.cloud.compute.call("POST", "/servers", MICROVERSION, {
      server: {
        name,
        imageRef: this.cloud.image,
        flavorRef: flavor,
        networks: "none",
        ...(node !== undefined && { hypervisor_hostname: node }),
      },
    });
    return s.id as string;
  }

  /**
   * Boot `names` one after the other, each placed before the next is sent (placement 16 on
   * this stack let two claims sent together both take a node's one unit: both PUT
   * /allocations answered 204, which no test here is about), then each ACTIVE. Their ids.
   */
  async bootSerially(names: string[], flavor: string): Promise<string[]> {
    const ids: string[] = [];
    for (const name of names) {
      const id = await this.boot(name, flavor);
      await this.untilServer(id, "placed", (s) => s.node !== null);
      ids.push(id);
    }
    for (const id of ids) await this.untilServer(id, "ACTIVE", settled("ACTIVE"));
    return ids;
  }

  /** An action on a server (reboot, os-stop, os-start): nova's answer, 202 when it took it. */
  act(id: string, body: unknown) {
    return this.cloud.compute.send("POST", `/servers/${id}/action`, MICROVERSION, body);
  }

  /** The server's instance actions, oldest first: each one's name, request id and start. */
  async actions(id: string): Promise<Array<{ action: string; requestId: string; startTime: string }>> {
    const { instanceActions } = (await this.cloud.compute.call(
      "GET",
      `/servers/${id}/os-instance-actions`,
      MICROVERSION,
    )) as { instanceActions: Array<{ action: string; request_id: string; start_time: string }> };
    return instanceActions
      .map((a) => ({ action: a.action, requestId: a.request_id, startTime: a.start_time }))
      .sort((a, b) => a.startTime.localeCompare(b.startTime));
  }

  /** The events of one instance action, as nova recorded them: each one's result, and why when it failed. */
  async events(id: string, requestId: string): Promise<ActionEvent[]> {
    const { instanceAction } = await this.cloud.compute.call(
      "GET",
      `/servers/${id}/os-instance-actions/${requestId}`,
      MICROVERSION,
    );
    const { events } = instanceAction as { events: ActionEvent[] };
    return events.map(({ event, result, details }) => ({ event, result, ...(details && { details }) }));
  }

  /**
   * Until nova records a reboot of the server, asked at or after `since` (ms of the epoch;
   * nova's times are read with a second of slack), carried out (its compute event
   * `Success`), within `withinMs`: every such reboot, oldest first, with its events.
   */
  untilRebooted(
    id: string,
    since: number,
    withinMs = ACTION_DEADLINE_MS,
  ): Promise<Array<{ action: string; requestId: string; startTime: string; events: ActionEvent[] }>> {
    return until(
      `a reboot of ${id} carried out`,
      async () => {
        const mine = (await this.actions(id)).filter(
          (a) => a.action === "reboot" && Date.parse(`${a.startTime}Z`) >= since - 1000,
        );
        return Promise.all(mine.map(async (a) => ({ ...a, events: await this.events(id, a.requestId) })));
      },
      (reboots) => reboots.some(rebootSucceeded),
      withinMs,
      200,
    );
  }

  /** The events of the server's last action of `name`, or null when it has none. */
  async lastAction(id: string, name: string): Promise<ActionEvent[] | null> {
    const latest = (await this.actions(id)).filter((a) => a.action === name).at(-1);
    return latest === undefined ? null : this.events(id, latest.requestId);
  }

  /** Placement's allocations of a server (a consumer): provider -> resources. */
  async allocations(id: string): Promise<Record<string, Record<string, number>>> {
    const { allocations: held } = await this.cloud.placementGet(`/allocations/${id}`);
    return Object.fromEntries(
      Object.entries(held as Record<string, { resources: Record<string, number> }>).map(([rp, a]) => [
        rp,
        a.resources,
      ]),
    );
  }

  /** Ironic's node: who it is deployed for, and its states. */
  async ironicNode(uuid: string): Promise<IronicNodeView> {
    const n = await ironicApi(
      this.cloud,
      "GET",
      `/v1/nodes/${uuid}?fields=uuid,instance_uuid,provision_state,power_state`,
    );
    return {
      uuid: n.uuid as string,
      instance: n.instance_uuid as string | null,
      provision: n.provision_state as string,
      power: n.power_state as string | null,
    };
  }

  /** Every record of the servers `ids`. */
  async records(ids: string[]): Promise<InstanceRecords[]> {
    const rows = this.cloud.novaInstances();
    return Promise.all(
      ids.map(async (id) => {
        const api = await this.server(id);
        return {
          api,
          db: rows.find((r) => r.uuid === id) as NovaInstance,
          allocations: await this.allocations(id),
          ironic: await this.ironicNode(api.node!),
        };
      }),
    );
  }
}
