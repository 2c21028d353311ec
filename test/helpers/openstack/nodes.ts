import { ironicApi, type OpenStackCloud } from "./cloud.js";

/** Until every node of `uuids` is in `state` in Ironic. */
export async function untilProvisionState(
  cloud: OpenStackCloud,
  uuids: string[],
  state: string,
): Promise<void> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    const { nodes } = await ironicApi(cloud, "GET", "/v1/nodes?fields=uuid,provision_state");
    const pending = (nodes as Array<{ uuid: string; provision_state: string }>).filter(
      (n) => uuids.includes(n.uuid) && n.provision_state !== state,
    );
    if (pending.length === 0) return;
    if (performance.now() > deadline) throw new Error(`nodes not ${state}: ${JSON.stringify(pending)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Enroll fake-hardware nodes in `shard` (or none) and make them available, as an operator
 * would; their uuids. `uuids`, when given, are the nodes' uuids (one per name), else
 * Ironic picks them.
 */
export async function enrollAvailable(
  cloud: OpenStackCloud,
  names: string[],
  shard: string | null,
  uuids?: readonly string[],
): Promise<string[]> {
  const enrolled: string[] = [];
  for (const [i, name] of names.entries()) {
    const node = await ironicApi(cloud, "POST", "/v1/nodes", {
      driver: "fake-hardware",
      name,
      resource_class: "baremetal",
      properties: { cpus: 8, memory_mb: 16384, local_gb: 100, cpu_arch: "x86_64" },
      ...(shard !== null && { shard }),
      ...(uuids !== undefined && { uuid: uuids[i] }),
    });
    enrolled.push(node.uuid);
  }
  for (const uuid of enrolled)
    await ironicApi(cloud, "PUT", `/v1/nodes/${uuid}/states/provision`, { target: "manage" });
  await untilProvisionState(cloud, enrolled, "manageable");
  for (const uuid of enrolled)
    await ironicApi(cloud, "PUT", `/v1/nodes/${uuid}/states/provision`, { target: "provide" });
  await untilProvisionState(cloud, enrolled, "available");
  return enrolled;
}
