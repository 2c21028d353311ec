import { expect } from "chai";
import { readFileSync } from "node:fs";
import { startBridge, type BridgeProcess } from "./helpers/bridge-process.js";
import { runShardbridge } from "./helpers/cli.js";
import { call } from "./helpers/http.js";
import { ironicApi, sharedCloud, type OpenStackCloud } from "./helpers/openstack/cloud.js";
import { manageableNode, playInspection, until, untilState } from "./helpers/openstack/inspection.js";
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
    for (const [k, mac] of macs.entries()) nodes.push(await manageableNode(cloud, `insp-${k}`, mac, SHARD));
    const sync = await runShardbridge([
      ...[
        "ironic-sync",
        "--ironic",
        cloud.ironic,
        "--bridge",
        bridges[0]!.url,
        "--token",
        bridges[0]!.tokenFor("admin"),
      ],
    ]);
    expect(sync.status, sync.stderr).to.equal(0);

    // Each step's time after the ramdisk's callback: Ironic done with the node (manageable),
    // the bridge applied the result (its log line's time), the traits in Ironic.
    const steps: string[] = [];
    for (const [k, node] of nodes.entries()) {
      const postedAt = await playInspection(cloud, node, macs[k]!, inventory);
      const postedWall = Date.now() - (performance.now() - postedAt);
      const ironicDone = await untilState(cloud, node, "manageable").then(() => performance.now() - postedAt);
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
