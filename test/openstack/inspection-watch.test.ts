import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IronicClient } from "../../src/upstream/ironic-client.js";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge, type BridgeProcess } from "../helpers/bridge-process.js";
import { bridgeTraits, TEST_WEBHOOK_SECRET } from "../helpers/http.js";
import {
  createIronicNode,
  enrollForInspection,
  inspectWithInventory,
  peerInventory,
  useIronicPeer,
  type IronicPeer,
} from "../helpers/ironic-peer.js";

/** A MAC of our own, so the inspector's lookup finds this test's node and no other. */
const randomMac = () =>
  ["52", "54", ...[...randomBytes(4)].map((b) => b.toString(16).padStart(2, "0"))].join(":");

/** The fake ramdisk's inventory with `mac` on its one NIC, and changes of the test's choosing. */
function inventoryWith(mac: string, nic: { vendor: string }, cpuFlags: string[]): unknown {
  const base = peerInventory();
  const inventory = {
    ...base.inventory,
    interfaces: base.inventory.interfaces.map((i: object) => ({ ...i, mac_address: mac, ...nic })),
    cpu: { ...base.inventory.cpu, flags: cpuFlags },
    boot: { ...base.inventory.boot, pxe_interface: mac },
  };
  return { ...base, inventory, boot_interface: mac };
}

describe("Inspection watcher: real Ironic and ironic-inspector, unmodified", function () {
  this.timeout(600_000);
  let peer: IronicPeer;
  let bridge: BridgeProcess;
  let ironic: IronicClient;
  let work: string;

  const peers = useIronicPeer("inspection watcher e2e", { inspector: true });
  before(async () => {
    peer = peers.peer;
    ironic = new IronicClient(peer.endpoint);
    bridge = await startBridge({
      shards: [{ name: "rack-w", lease_ttl_ms: 3000 }],
      agents: [],
      args: ["--trait-rules", "examples/trait-rules.json", "--ironic", peer.endpoint],
    });
    work = mkdtempSync(join(tmpdir(), "sb-watch-"));
  });
  after(async () => {
    await bridge?.stop();
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  /** Run a shardbridge command to its end; answer its last JSON line on stdout. */
  async function runCli(args: string[]): Promise<{ code: number | null; report: any }> {
    const cli = AgentProcess.cli(args[0]!, args);
    await cli.exited();
    const reports = cli.events.filter((e) => typeof e.due === "number" || typeof e.nodes === "number");
    if (process.env.DEBUG_WATCH) console.log(JSON.stringify(cli.events));
    return { code: cli.child.exitCode, report: reports.at(-1) };
  }
  const watchOnce = (...extra: string[]) =>
    runCli([
      ...["inspection-watch", "--once", "--ironic", peer.endpoint, "--bridge", bridge.url],
      ...["--token", bridge.tokenFor("inspector"), "--secret", TEST_WEBHOOK_SECRET, ...extra],
    ]);
  /** Ironic's traits once the bridge's delivery queue has caught up with `expected` (or the last seen after 20 s). */
  async function ironicTraitsSettling(node: string, expected: string[]): Promise<string[]> {
    const deadline = performance.now() + 20_000;
    for (;;) {
      const now = (await ironic.traits(node)).sort();
      if (JSON.stringify(now) === JSON.stringify(expected) || performance.now() > deadline) return now;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it("inspect, traits appear in the bridge and in Ironic; change the NIC and CPU, re-inspect, stale traits go", async () => {
    const mac = randomMac();
    const node = await createIronicNode(peer.endpoint, {
      name: "watched-1",
      shard: "rack-w",
      inspect_interface: "inspector",
    });
    await enrollForInspection(peer.endpoint, node, mac);
    // Someone else's trait in Ironic: the bridge must never replace the list.
    await ironic.addTrait(node, "CUSTOM_OPERATOR_PINNED");
    const firstFinished = await inspectWithInventory(
      peer,
      node,
      inventoryWith(mac, { vendor: "0x8086" }, ["avx2", "vmx"]),
    );

    // The bridge does not know the node yet: reported, not lost; the next poll tries again.
    const early = await watchOnce();
    expect(early.code).to.equal(0);
    expect(early.report).to.include({ due: 1, unknownNode: 1, applied: 0 });

    const sync = await runCli([
      ...[
        "ironic-sync",
        "--ironic",
        peer.endpoint,
        "--bridge",
        bridge.url,
        "--token",
        bridge.tokenFor("admin"),
      ],
    ]);
    expect(sync.code).to.equal(0);

    const state = join(work, "watch-state.json");
    const first = await watchOnce("--state", state);
    expect(first.report, JSON.stringify(first.report)).to.include({ due: 1, applied: 1, failed: 0 });
    const found = ["CUSTOM_BOOT_UEFI", "CUSTOM_DEV_VENDORID_8086", "HW_CPU_X86_AVX2", "HW_CPU_X86_VMX"];
    expect(await bridgeTraits(bridge.url, node, bridge.tokenFor("admin"))).to.deep.equal(
      found.map((name) => ({ name, owner: "inspector" })),
    );
    expect(await ironicTraitsSettling(node, [...found, "CUSTOM_OPERATOR_PINNED"].sort())).to.deep.equal(
      [...found, "CUSTOM_OPERATOR_PINNED"].sort(),
    );

    // Nothing finished since: a restarted watcher with its state file fetches nothing.
    expect((await watchOnce("--state", state)).report).to.include({ inspected: 1, due: 0 });
    // Without state, and reading from the inspector instead: the same inspection again,
    // which the bridge recognises by its delivery id and does not apply twice.
    const again = await watchOnce("--inspector", peer.inspectorEndpoint!);
    expect(again.report).to.include({ due: 1, already: 1, applied: 0 });

    // The Intel NIC is swapped for a Mellanox one and AVX2 is gone; inspect again.
    const secondFinished = await inspectWithInventory(
      peer,
      node,
      inventoryWith(mac, { vendor: "0x15b3" }, ["vmx"]),
    );
    expect(Date.parse(secondFinished)).to.be.greaterThan(Date.parse(firstFinished));
    // From here the data comes from the inspector: Ironic 21.4 keeps one inventory row per
    // inspection and answers 500 for a node inspected twice (see ironicInventorySource).
    const second = await watchOnce("--state", state, "--inspector", peer.inspectorEndpoint!);
    expect(second.report, JSON.stringify(second.report)).to.include({ due: 1, applied: 1, failed: 0 });
    const now = ["CUSTOM_BOOT_UEFI", "CUSTOM_DEV_VENDORID_15B3", "HW_CPU_X86_VMX"];
    expect(await bridgeTraits(bridge.url, node, bridge.tokenFor("admin"))).to.deep.equal(
      now.map((name) => ({ name, owner: "inspector" })),
    );
    expect(await ironicTraitsSettling(node, [...now, "CUSTOM_OPERATOR_PINNED"].sort())).to.deep.equal(
      [...now, "CUSTOM_OPERATOR_PINNED"].sort(),
    );

    // Inspected again, the hardware as it was: delivered and applied, and said to change nothing.
    await new Promise((r) => setTimeout(r, 1000)); // Ironic keeps the finish time to the second
    await inspectWithInventory(peer, node, inventoryWith(mac, { vendor: "0x15b3" }, ["vmx"]));
    const third = await watchOnce("--state", state, "--inspector", peer.inspectorEndpoint!);
    expect(third.report, JSON.stringify(third.report)).to.include({ due: 1, applied: 0, unchanged: 1 });
  });

  it("a watcher with the wrong secret delivers nothing, says so and exits 1, and leaves the inspection due", async () => {
    const state = join(work, "wrong-secret.json");
    const wrong = await runCli([
      ...["inspection-watch", "--once", "--ironic", peer.endpoint, "--bridge", bridge.url],
      ...["--token", bridge.tokenFor("inspector"), "--secret", "not-the-secret", "--state", state],
      ...["--inspector", peer.inspectorEndpoint!],
    ]);
    expect(wrong.code).to.equal(1);
    expect(wrong.report.failed).to.be.greaterThan(0);
    expect(wrong.report.applied).to.equal(0);
    // Fixed, the same state file still has every inspection due.
    const fixed = await watchOnce("--state", state, "--inspector", peer.inspectorEndpoint!);
    expect(fixed.report.due).to.equal(wrong.report.due);
    expect(fixed.report).to.include({ failed: 0, applied: 0, already: fixed.report.due });
  });
});
