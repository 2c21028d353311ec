import { expect } from "chai";
import { readFileSync } from "node:fs";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { runShardbridge } from "./helpers/cli.js";
import { call } from "./helpers/http.js";
import { IRONIC_HEADERS, ironicApi, sharedCloud, type OpenStackCloud } from "./helpers/openstack/cloud.js";
import { TestRedisServer } from "./helpers/redis-server.js";
import { parseOrThrow } from "../src/domain/validation.js";
import { InspectionData, TraitRulesFile, desiredTraits } from "../src/traits/inspection.js";

const EXAMPLES = new URL("../examples/", import.meta.url);
const SHARD = "rack-i";
/** What the trait rules (examples/trait-rules.json) find in examples/inspection-result.json (test/traits.test.ts pins the list). */
const FOUND = desiredTraits(
  parseOrThrow(InspectionData, JSON.parse(readFileSync(new URL("inspection-result.json", EXAMPLES), "utf8"))),
  parseOrThrow(TraitRulesFile, JSON.parse(readFileSync(new URL("trait-rules.json", EXAMPLES), "utf8"))).rules,
);

async function until<T>(
  what: string,
  read: () => Promise<T>,
  done: (v: T) => boolean,
  withinMs: number,
): Promise<T> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (performance.now() > deadline)
      throw new Error(`${what}: not within ${withinMs} ms (last: ${JSON.stringify(value)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Inspection from a current Ironic, without ironic-inspector: Ironic 39's built-in
 * inspection (`inspect_interface = agent`) announces a node's passage out of inspection
 * on RabbitMQ; the bridges read it, fetch the node's inventory from Ironic, run the trait
 * rules and apply the result — each inspection once across two bridges on one store —,
 * and deliver the traits back to Ironic. The test plays the ramdisk through Ironic's own
 * API (`POST /v1/continue_inspection`, what ironic-python-agent sends).
 */
describe("inspection from Ironic 39's notifications (real Ironic, RabbitMQ, two bridges on one Redis)", function () {
  this.timeout(300_000);
  let cloud: OpenStackCloud;
  let redis: TestRedisServer;
  let bridges: BridgeProcess[] = [];
  const inventory = JSON.parse(readFileSync(new URL("inspection-result.json", EXAMPLES), "utf8"));

  /** A node of the shard with a port of its own MAC, enrolled and manageable, known to the bridges. */
  const manageableNode = async (name: string, mac: string): Promise<string> => {
    const node = await ironicApi(cloud, "POST", "/v1/nodes", {
      driver: "fake-hardware",
      name,
      shard: SHARD,
      inspect_interface: "agent",
    });
    await ironicApi(cloud, "POST", "/v1/ports", { node_uuid: node.uuid, address: mac });
    await ironicApi(cloud, "PUT", `/v1/nodes/${node.uuid}/states/provision`, { target: "manage" });
    await until(
      "manageable",
      () => ironicApi(cloud, "GET", `/v1/nodes/${node.uuid}`),
      (n) => n.provision_state === "manageable",
      30_000,
    );
    return node.uuid as string;
  };

  /** Inspect the node in Ironic and play its ramdisk: the inventory (with the node's MAC) posted back. */
  const inspect = async (node: string, mac: string): Promise<number> => {
    await ironicApi(cloud, "PUT", `/v1/nodes/${node}/states/provision`, { target: "inspect" });
    await until(
      "inspect wait",
      () => ironicApi(cloud, "GET", `/v1/nodes/${node}`),
      (n) => n.provision_state === "inspect wait",
      30_000,
    );
    // Every interface gets a MAC of this node's own (Ironic finds the node by its ports' MACs).
    const body = {
      inventory: {
        ...inventory.inventory,
        interfaces: inventory.inventory.interfaces.map((i: object, k: number) => ({
          ...i,
          mac_address: `${mac.slice(0, -2)}${String(k).padStart(2, "0")}`,
        })),
        boot: { ...inventory.inventory.boot, pxe_interface: mac },
      },
      pci_devices: inventory.pci_devices,
    };
    // As the ramdisk does, with no token (Ironic takes this call from anyone): a node still
    // locked by the conductor (powering on) answers 409; again.
    for (let attempt = 1; ; attempt++) {
      const postedAt = performance.now();
      const res = await fetch(`${cloud.ironic}/v1/continue_inspection`, {
        method: "POST",
        headers: IRONIC_HEADERS,
        body: JSON.stringify(body),
      });
      if (res.status === 202) return postedAt;
      if (res.status !== 409 || attempt === 50)
        throw new Error(`continue_inspection: ${res.status} ${await res.text()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const bridgeTraits = async (bridge: BridgeProcess, node: string): Promise<string[]> => {
    const { body } = await call(
      `${bridge.url}/v1/nodes/${node}/traits`,
      "GET",
      undefined,
      bridge.tokenFor("admin"),
    );
    return (body.traits as Array<{ name: string }>).map((t) => t.name).sort();
  };
  const ironicTraits = async (node: string): Promise<string[]> =>
    ((await ironicApi(cloud, "GET", `/v1/nodes/${node}/traits`)).traits as string[]).sort();
  const applied = (node: string) =>
    bridges.flatMap((b) => b.serve.events.filter((e) => e.ev === "inspection-applied" && e.node === node));

  before(async () => {
    cloud = await sharedCloud();
    redis = await TestRedisServer.start();
    // Two bridges on one store, both reading the one queue of Ironic's notifications.
    const options = {
      shards: [{ name: SHARD, lease_ttl_ms: 6000 }],
      agents: ["compute-i"],
      store: redis.url,
      // The bridges read Ironic as their own keystone user (an application credential).
      env: cloud.bridgeEnv,
      args: [
        ...["--ironic", cloud.ironic, "--ironic-notifications", cloud.vhost.amqpUrl],
        ...["--ironic-notifications-queue", `shardbridge.test-${process.pid}`],
        ...["--trait-rules", new URL("trait-rules.json", EXAMPLES).pathname],
        ...["--ownership", new URL("ownership.json", EXAMPLES).pathname],
      ],
    };
    const first = await startBridge(options);
    bridges = [first, await startBridge({ ...options, tokens: first.tokens })];
    for (const b of bridges) await b.serve.waitFor((e) => e.ev === "ironic-notifications-listening", 30_000);
  });
  after(async () => {
    for (const b of bridges) await b.stop();
    await redis?.stop();
  });

  it("each inspection Ironic finishes is applied once across the bridges, and its traits reach Ironic", async () => {
    const macs = ["52:54:00:00:01:00", "52:54:00:00:02:00", "52:54:00:00:03:00", "52:54:00:00:04:00"];
    const nodes: string[] = [];
    for (const [k, mac] of macs.entries()) nodes.push(await manageableNode(`insp-${k}`, mac));
    const sync = await runShardbridge(
      [
        ...[
          "ironic-sync",
          "--ironic",
          cloud.ironic,
          "--bridge",
          bridges[0]!.url,
          "--token",
          bridges[0]!.tokenFor("admin"),
        ],
      ],
      cloud.bridgeEnv,
    );
    expect(sync.status, sync.stderr).to.equal(0);

    // Each step's time after the ramdisk's callback: Ironic done with the node (manageable),
    // the bridge applied the result (its log line's time), the traits in Ironic.
    const steps: string[] = [];
    for (const [k, node] of nodes.entries()) {
      const postedAt = await inspect(node, macs[k]!);
      const postedWall = Date.now() - (performance.now() - postedAt);
      const ironicDone = await until(
        "manageable",
        () => ironicApi(cloud, "GET", `/v1/nodes/${node}`),
        (n) => n.provision_state === "manageable",
        30_000,
      ).then(() => performance.now() - postedAt);
      await until(
        "the traits in Ironic",
        () => ironicTraits(node),
        (t) => FOUND.every((f) => t.includes(f)),
        30_000,
      );
      const inIronic = performance.now() - postedAt;
      const bridgeApplied = Date.parse(String(applied(node)[0]?.timestamp)) - postedWall;
      steps.push([ironicDone, bridgeApplied, inIronic].map((ms) => ms.toFixed(0)).join("/"));
    }
    console.log(
      `      ramdisk's callback -> Ironic done / the bridge applied / the traits in Ironic, ms: ${steps.join(", ")}`,
    );
    for (const node of nodes) {
      expect(await bridgeTraits(bridges[1]!, node)).to.deep.equal(FOUND);
      expect(applied(node), `bridges that applied ${node}'s inspection`).to.have.length(1);
    }
  });
});
