import { ironicApi, type OpenStackCloud } from "./cloud.js";

/** An Ironic to call: the shared cloud's, or `{ ironic: URL }` of a test's own. */
type Ironic = Pick<OpenStackCloud, "ironic">;

/** Ironic calls in flight at once while enrolling (its one API worker queues the rest). */
const CONCURRENCY = 8;

/** `each` over `items`, at most CONCURRENCY at a time; the results in the items' order. */
async function inTurns<T, R>(items: T[], each: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const k = next++;
      results[k] = await each(items[k]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
  return results;
}

/** Until every node of `uuids` has `value` in `field` in Ironic. */
async function untilEvery(
  cloud: Ironic,
  uuids: string[],
  field: "provision_state" | "power_state",
  value: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const wanted = new Set(uuids);
  for (;;) {
    const { nodes } = await ironicApi(cloud, "GET", `/v1/nodes?fields=uuid,${field}`);
    const pending = (nodes as Array<{ uuid: string } & Record<typeof field, string | null>>).filter(
      (n) => wanted.has(n.uuid) && n[field] !== value,
    );
    if (pending.length === 0) return;
    if (performance.now() > deadline)
      throw new Error(
        `nodes not ${value}: ${JSON.stringify(pending.slice(0, 10))} (${pending.length} in all)`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Until every node of `uuids` is in `state` in Ironic. */
export function untilProvisionState(
  cloud: Ironic,
  uuids: string[],
  state: string,
  timeoutMs = 60_000 + uuids.length * 500,
): Promise<void> {
  return untilEvery(cloud, uuids, "provision_state", state, timeoutMs);
}

/**
 * Enroll fake-hardware nodes in `shard` (or none) and make them available, as an operator
 * would; their uuids. `given`, when there, are the nodes' uuids (one per name), else Ironic
 * picks them.
 */
export async function enrollAvailable(
  cloud: Ironic,
  names: string[],
  shard: string | null,
  given?: readonly string[],
): Promise<string[]> {
  const uuids = await inTurns([...names.entries()], async ([i, name]) => {
    const node = await ironicApi(cloud, "POST", "/v1/nodes", {
      driver: "fake-hardware",
      name,
      resource_class: "baremetal",
      properties: { cpus: 8, memory_mb: 16384, local_gb: 100, cpu_arch: "x86_64" },
      ...(shard !== null && { shard }),
      ...(given !== undefined && { uuid: given[i] }),
    });
    return node.uuid as string;
  });
  await inTurns(uuids, (uuid) =>
    ironicApi(cloud, "PUT", `/v1/nodes/${uuid}/states/provision`, { target: "manage" }),
  );
  await untilProvisionState(cloud, uuids, "manageable");
  await inTurns(uuids, (uuid) =>
    ironicApi(cloud, "PUT", `/v1/nodes/${uuid}/states/provision`, { target: "provide" }),
  );
  await untilProvisionState(cloud, uuids, "available");
  return uuids;
}

/**
 * Power the nodes on through Ironic's API, as an operator does before nova may use them:
 * fake-hardware's power starts unknown (None), which nova reports as reserved, so the
 * scheduler finds no allocation candidate on them. Until Ironic says each is on.
 */
export async function powerOn(cloud: Ironic, uuids: string[]): Promise<void> {
  await inTurns(uuids, (uuid) =>
    ironicApi(cloud, "PUT", `/v1/nodes/${uuid}/states/power`, { target: "power on" }),
  );
  await untilEvery(cloud, uuids, "power_state", "power on", 30_000);
}
