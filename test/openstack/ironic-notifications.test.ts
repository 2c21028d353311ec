import { expect } from "chai";
import { readFileSync } from "node:fs";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { runShardbridge } from "../helpers/cli.js";
import { bridgeTraitNames, TEST_WEBHOOK_SECRET } from "../helpers/http.js";
import { ironicApi, sharedCloud, type OpenStackCloud } from "../helpers/openstack/cloud.js";
import { manageableNode, playInspection, untilState } from "../helpers/openstack/inspection.js";
import { TestRedisServer } from "../helpers/redis-server.js";
import { until } from "../helpers/until.js";
import { parseOrThrow } from "../../src/core/validation.js";
import { InspectionData } from "../../src/contracts/traits.js";
import { TraitRulesFile, desiredTraits } from "../../src/bridge/inspection/trait-rules.js";

const EXAMPLES = new URL("../../examples/", import.meta.url);
const SHARD = "rack-i";
/** What the trait rules (examples/trait-rules.json) find in examples/inspection-result.json (test/unit/traits.test.ts pins the list). */
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

  /** A node of the shard, manageable, with a port of MAC `mac`. */
  const manageable = (name: string, mac: string) => manageableNode(cloud, name, mac, SHARD);
  /** Inspect it in Ironic, the ramdisk played with `inventory` as it is now. */
  const inspect = (node: string, mac: string) => playInspection(cloud, node, mac, inventory);

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
    for (const [k, mac] of macs.entries()) nodes.push(await manageableNode(cloud, `insp-${k}`, mac, SHARD));
    await sync(bridges[0]!);

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
      expect(await bridgeTraitNames(bridges[1]!.url, node, bridges[1]!.tokenFor("admin"))).to.deep.equal(
        FOUND,
      );
      expect(applied(node), `bridges that applied ${node}'s inspection`).to.have.length(1);
    }
  });

  /** ironic-sync into `bridge`: the bridge learns Ironic's nodes. */
  const sync = async (bridge: BridgeProcess) => {
    const run = await runShardbridge(
      [
        ...["ironic-sync", "--ironic", cloud.ironic, "--bridge", bridge.url],
        ...["--token", bridge.tokenFor("admin")],
      ],
      cloud.bridgeEnv,
    );
    expect(run.status, run.stderr).to.equal(0);
  };

  it("Ironic's own inspection rules beside the bridge's: each side's traits kept, the bridge removes only what it added", async () => {
    // Two rules in Ironic, run by its conductor during inspection before the bridge hears
    // of it: one adds a trait in the namespace examples/ownership.json gives the bridge's
    // inspection (which its trait rules do not find in this data), one a trait the bridge
    // does not own at all; a third adds one the bridge's rules find too.
    const ours = "HW_CPU_X86_VMX";
    expect(FOUND).to.include(ours);
    const rules: string[] = [];
    for (const name of ["CUSTOM_DEV_VENDORID_ABCD", "CUSTOM_IRONIC_RULE", ours]) {
      const rule = await ironicApi(cloud, "POST", "/v1/inspection_rules", {
        description: `shardbridge test: add ${name}`,
        phase: "main",
        conditions: [],
        actions: [{ op: "add-trait", args: { name } }],
      });
      rules.push(rule.uuid as string);
    }
    try {
      const mac = "52:54:00:00:05:00";
      const node = await manageable("insp-rules", mac);
      await sync(bridges[0]!);
      await inspect(node, mac);
      const union = [...new Set([...FOUND, "CUSTOM_DEV_VENDORID_ABCD", "CUSTOM_IRONIC_RULE"])].sort();
      const inIronic = await until(
        "the union in Ironic",
        () => ironicTraits(node),
        (t) => union.every((u) => t.includes(u)),
        30_000,
      );
      expect(inIronic).to.deep.equal(union);
      // The bridge holds only what its own rules decided.
      expect(await bridgeTraitNames(bridges[0]!.url, node, bridges[0]!.tokenFor("admin"))).to.deep.equal(
        FOUND,
      );

      // Inspected again without the CPU flag: Ironic's rule adds the trait again as it
      // inspects; the bridge's rules no longer find it, and the bridge, which hears of the
      // inspection after Ironic's rules ran, takes back the trait it had added (`-`). Its
      // decision is the last word on a trait both decide; Ironic's other two stay.
      // Ironic keeps inspection_finished_at to the second, and the bridge orders a node's
      // inspections by it: a second inspection in the same second would be refused as stale.
      await new Promise((r) => setTimeout(r, 1100));
      const flags = inventory.inventory.cpu.flags as string[];
      inventory.inventory.cpu.flags = flags.filter((f) => f !== "vmx");
      const fewer = FOUND.filter((t) => t !== ours);
      try {
        await inspect(node, mac);
      } finally {
        inventory.inventory.cpu.flags = flags;
      }
      await until(
        "the bridge's trait gone from Ironic",
        () => ironicTraits(node),
        (t) => !t.includes(ours),
        30_000,
      );
      expect(await ironicTraits(node)).to.deep.equal(
        [...new Set([...fewer, "CUSTOM_DEV_VENDORID_ABCD", "CUSTOM_IRONIC_RULE"])].sort(),
      );
      expect(await bridgeTraitNames(bridges[0]!.url, node, bridges[0]!.tokenFor("admin"))).to.deep.equal(
        fewer,
      );
    } finally {
      for (const rule of rules) await ironicApi(cloud, "DELETE", `/v1/inspection_rules/${rule}`);
    }
  });

  it("without notifications, inspection-watch reads only the inspections that finished since its window", async () => {
    // A bridge of its own that listens to nothing (an Ironic without notifications), and
    // the fallback: the watcher, polling Ironic 39 and posting to the webhook.
    const quiet = await startBridge({
      shards: [{ name: SHARD, lease_ttl_ms: 6000 }],
      agents: ["compute-i"],
      env: cloud.bridgeEnv,
      args: [
        ...["--ironic", cloud.ironic],
        ...["--trait-rules", new URL("trait-rules.json", EXAMPLES).pathname],
        ...["--ownership", new URL("ownership.json", EXAMPLES).pathname],
      ],
    });
    const state = `${quiet.dir}/watch-state.json`;
    try {
      await sync(quiet);
      const watchOnce = async () => {
        const run = await runShardbridge(
          [
            ...["inspection-watch", "--once", "--ironic", cloud.ironic, "--bridge", quiet.url],
            ...["--token", quiet.tokenFor("inspector"), "--secret", TEST_WEBHOOK_SECRET],
            ...["--state", state, "--lookback", "1"],
          ],
          cloud.bridgeEnv,
        );
        expect(run.status, run.stderr).to.equal(0);
        return JSON.parse(run.stdout.trim().split("\n").at(-1)!);
      };
      const { nodes } = await ironicApi(
        cloud,
        "GET",
        `/v1/nodes?fields=uuid,inspection_finished_at&limit=1000`,
      );
      const inspected = (nodes as Array<{ inspection_finished_at: string | null }>).filter(
        (n) => n.inspection_finished_at !== null,
      ).length;
      // First poll: every node's last inspection, each applied once.
      const first = await watchOnce();
      expect(first).to.include({ inspected, due: inspected, applied: inspected, failed: 0 });
      // Nothing finished since: at most the newest (within the 1 s lookback) is read again.
      const again = await watchOnce();
      expect(again.inspected).to.be.at.most(1);
      expect(again.due).to.equal(0);
      // One node inspected anew (over a second later): the poll reads it and what is within
      // a second before the newest it saw, not the fleet.
      await new Promise((r) => setTimeout(r, 1100));
      const mac = "52:54:00:00:06:00";
      const node = await manageable("insp-watched", mac);
      await sync(quiet);
      await inspect(node, mac);
      await until(
        "inspected",
        () => ironicApi(cloud, "GET", `/v1/nodes/${node}`),
        (n) => n.provision_state === "manageable",
        30_000,
      );
      const next = await watchOnce();
      expect(next).to.include({ due: 1, applied: 1, failed: 0 });
      expect(next.inspected).to.be.at.most(2);
      expect(await bridgeTraitNames(quiet.url, node, quiet.tokenFor("admin"))).to.deep.equal(FOUND);
      console.log(
        `      watcher polls read ${first.inspected}, ${again.inspected}, ${next.inspected} inspections (${inspected + 1} nodes inspected in Ironic)`,
      );
    } finally {
      await quiet.stop();
    }
  });
});
