import { until } from "../until.js";
import { IRONIC_HEADERS, ironicApi, type OpenStackCloud } from "./cloud.js";

/** An Ironic to call: the shared cloud's, or one of a test's own (`ironicHeaders` when it is behind keystone). */
type Ironic = Pick<OpenStackCloud, "ironic"> & Partial<Pick<OpenStackCloud, "ironicHeaders">>;

/** Until the node's provision state is `state` (within 30 s). */
export const untilState = (ironic: Ironic, node: string, state: string): Promise<unknown> =>
  until(
    state,
    () => ironicApi(ironic, "GET", `/v1/nodes/${node}`),
    (n) => n.provision_state === state,
    30_000,
  );

/** A node of `shard` with a port of MAC `mac`, the `agent` inspect interface, enrolled and manageable. */
export async function manageableNode(
  ironic: Ironic,
  name: string,
  mac: string,
  shard: string,
): Promise<string> {
  const node = await ironicApi(ironic, "POST", "/v1/nodes", {
    driver: "fake-hardware",
    name,
    shard,
    inspect_interface: "agent",
  });
  await ironicApi(ironic, "POST", "/v1/ports", { node_uuid: node.uuid, address: mac });
  await ironicApi(ironic, "PUT", `/v1/nodes/${node.uuid}/states/provision`, { target: "manage" });
  await untilState(ironic, node.uuid, "manageable");
  return node.uuid as string;
}

/**
 * Inspect the node in Ironic and play its ramdisk, as ironic-python-agent does: `data`
 * (`{inventory, pci_devices}`, examples/inspection-result.json's shape) posted to `POST
 * /v1/continue_inspection`, every interface given a MAC of the node's own (Ironic finds the
 * node by its ports' MACs; the first is `mac`). When Ironic took the callback (performance.now()).
 */
export async function playInspection(
  ironic: Ironic,
  node: string,
  mac: string,
  data: { inventory: any; pci_devices: unknown[] },
): Promise<number> {
  await ironicApi(ironic, "PUT", `/v1/nodes/${node}/states/provision`, { target: "inspect" });
  await untilState(ironic, node, "inspect wait");
  const body = {
    inventory: {
      ...data.inventory,
      interfaces: data.inventory.interfaces.map((i: object, k: number) => ({
        ...i,
        mac_address: `${mac.slice(0, -2)}${String(k).padStart(2, "0")}`,
      })),
      boot: { ...data.inventory.boot, pxe_interface: mac },
    },
    pci_devices: data.pci_devices,
  };
  return postInventory(ironic.ironic, body);
}

/**
 * Post an inspection's data as the ramdisk does (`POST /v1/continue_inspection`, what
 * ironic-python-agent sends; Ironic finds the node by its ports' MACs). A node the conductor
 * still holds (powering it on) answers 409: posted again, as the ramdisk retries. When the
 * accepted post was sent (performance.now()).
 */
export async function postInventory(ironic: string, body: unknown): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const postedAt = performance.now();
    const res = await fetch(`${ironic}/v1/continue_inspection`, {
      method: "POST",
      headers: IRONIC_HEADERS,
      body: JSON.stringify(body),
    });
    if (res.status === 202) return postedAt;
    if (res.status !== 409 || attempt === 50)
      throw new Error(`continue_inspection: ${res.status} ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
