import { expect } from "chai";
import type { NovaComputeNode, NovaService, OpenStackCloud, PlacementProvider } from "./cloud.js";

/** A resource provider as placement has it: its generation and traits. */
export interface Provider {
  uuid: string;
  generation: number;
  traits: string[];
}

/** Every resource provider placement has, with its traits. */
export async function providers(cloud: Pick<OpenStackCloud, "placementGet">): Promise<Provider[]> {
  const { resource_providers: rps } = await cloud.placementGet("/resource_providers");
  return Promise.all(
    (rps as Array<{ uuid: string; generation: number }>).map(async (rp) => ({
      uuid: rp.uuid,
      generation: rp.generation,
      traits: ((await cloud.placementGet(`/resource_providers/${rp.uuid}/traits`)).traits as string[]).sort(),
    })),
  );
}

/** nova's and placement's records of a shard served as `host`, to compare before and after a fault. */
export interface ShardRecords {
  services: NovaService[];
  computeNodes: Array<Pick<NovaComputeNode, "id" | "uuid" | "host" | "deleted" | "createdAt">>;
  providers: Provider[];
  /** placement's rows for the providers, from its database: uuid and row id */
  providerRows: Array<Pick<PlacementProvider, "id" | "uuid">>;
}

export async function shardRecords(cloud: OpenStackCloud, host: string): Promise<ShardRecords> {
  return {
    services: cloud.novaServices().filter((s) => s.host === host),
    computeNodes: cloud
      .novaComputeNodes()
      .map(({ id, uuid, host, deleted, createdAt }) => ({ id, uuid, host, deleted, createdAt })),
    providers: await providers(cloud),
    providerRows: cloud.placementProviders().map(({ id, uuid }) => ({ id, uuid })),
  };
}

/**
 * The shard's records after a failover are the ones before it: one service record for the
 * host (the same row), the same compute nodes (ids, uuids, creation times, none deleted),
 * the same resource providers, none recreated: the same row in placement's database (a
 * provider deleted and made again under its uuid has a new row id, whatever its generation).
 */
export function expectSameRecords(before: ShardRecords, after: ShardRecords): void {
  expect(
    after.services.map((s) => [s.id, s.uuid, s.deleted]),
    "nova's service records for the host",
  ).to.deep.equal(before.services.map((s) => [s.id, s.uuid, false]));
  expect(after.services).to.have.length(1);
  expect(after.computeNodes, "nova's compute nodes").to.deep.equal(before.computeNodes);
  expect(after.providers.map((p) => p.uuid).sort(), "placement's providers").to.deep.equal(
    before.providers.map((p) => p.uuid).sort(),
  );
  expect(after.providerRows, "placement's provider rows (a recreated provider has a new id)").to.deep.equal(
    before.providerRows,
  );
}
