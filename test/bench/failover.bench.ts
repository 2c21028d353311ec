import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentProcess } from "../helpers/agent-process.js";
import { startBridge } from "../helpers/bridge-process.js";
import { createIronicNode, ironicPeersAvailable, startIronic } from "../helpers/ironic-peer.js";
import { percentile, printTable } from "./stats.js";
import { SHARDBRIDGE } from "../helpers/cli.js";

const STANDIN = fileURLToPath(new URL("../fixtures/nova_standin.py", import.meta.url));
const SHARD = "rack-failover";
const TTL_MS = 2000;
const ROUNDS = Number(process.env.BENCH_FAILOVER_ROUNDS ?? 10);

/**
 * Failover of a real child: two `shardbridge run` supervisors on one shard, each guarding
 * the nova-compute stand-in (oslo.config, openstacksdk, the real Ironic through the fenced
 * endpoint). Each round kills the active supervisor with -9 and measures, from the kill,
 * when the standby's keeper held the lease (its own `active` line) and when its stand-in
 * made its first write Ironic accepted (the stand-in's own record). Then the killed host's
 * supervisor is started again and the new active is sent SIGTERM: from the signal to the
 * standby holding the lease and to its child started (a handover by release).
 */
export async function failoverBench(): Promise<void> {
  if (!ironicPeersAvailable()) {
    process.stdout.write("failover bench: ../shared/peers not found, skipped\n");
    return;
  }
  const ironic = await startIronic();
  const bridge = await startBridge({
    shards: [{ name: SHARD, lease_ttl_ms: TTL_MS }],
    agents: ["host-a", "host-b"],
    args: ["--ironic", ironic.endpoint],
    env: { SHARDBRIDGE_LOG_LEVEL: "warn" },
  });
  const leaseMs: number[] = [];
  const writeMs: number[] = [];
  const handoverMs: number[] = [];
  const handoverChildMs: number[] = [];
  try {
    const node = await createIronicNode(ironic.endpoint, { name: "failover-node", shard: SHARD });
    await fetch(`${ironic.endpoint}/v1/nodes/${node}`, {
      method: "PATCH",
      headers: { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" },
      body: JSON.stringify([{ op: "add", path: "/extra/log", value: [] }]),
    });
    for (let round = 0; round < ROUNDS; round++) {
      const records = join(bridge.dir, `failover-${round}.jsonl`);
      writeFileSync(records, "");
      const accepted = (token: string) =>
        readFileSync(records, "utf8")
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { token: string; ev: string; ok?: boolean; received?: number })
          .filter((r) => r.ev === "write" && r.ok === true && r.token === token);
      const untilAccepted = async (token: string) => {
        for (const deadline = performance.now() + 20_000; accepted(token).length === 0;) {
          if (performance.now() > deadline)
            throw new Error(`round ${round}: no accepted write under ${token}`);
          await new Promise((r) => setTimeout(r, 10));
        }
        return accepted(token)[0]!.received!;
      };
      const supervise = (host: string, label: string) =>
        AgentProcess.spawnCommand(
          `${host}#${label}`,
          SHARDBRIDGE.command,
          [
            ...[...SHARDBRIDGE.args, "run", "--id", host, "--shard", SHARD, "--bridge", bridge.url],
            ...["--tokens-file", bridge.tokensFile, "--", "/usr/bin/python3", STANDIN],
          ],
          { STANDIN_NODE: node, STANDIN_RECORDS: records, SHARDBRIDGE_LOG_LEVEL: "info" },
        );
      const supervisors = ["host-a", "host-b"].map((host) => supervise(host, String(round)));
      try {
        const active = await Promise.race(
          supervisors.map((s) => s.waitFor((e) => e.ev === "child-started", 30_000).then(() => s)),
        );
        const standby = supervisors.find((s) => s !== active)!;
        await untilAccepted(String((await active.waitFor((e) => e.ev === "child-started", 1)).token));
        const killedAtMs = performance.now();
        const killedAtS = Date.now() / 1000;
        active.signal("SIGKILL");
        const took = await standby.waitFor((e) => e.ev === "active", TTL_MS + 5000);
        leaseMs.push(took.seenAt - killedAtMs);
        const started = await standby.waitFor((e) => e.ev === "child-started", 5000);
        writeMs.push(((await untilAccepted(String(started.token))) - killedAtS) * 1000);

        // The killed host's supervisor back as the standby, then SIGTERM to the active: the
        // handover by release (a systemctl stop), not by the lease running out.
        const back = supervise(active.name.split("#")[0]!, `${round}b`);
        supervisors.push(back);
        await back.waitFor((e) => e.ev === "standby", 30_000);
        await new Promise((r) => setTimeout(r, 100)); // its waiting acquire is at the bridge
        const termAtMs = performance.now();
        standby.signal("SIGTERM");
        handoverMs.push((await back.waitFor((e) => e.ev === "active", TTL_MS + 5000)).seenAt - termAtMs);
        handoverChildMs.push((await back.waitFor((e) => e.ev === "child-started", 5000)).seenAt - termAtMs);
      } finally {
        for (const s of supervisors) await s.kill();
      }
    }
  } finally {
    await bridge.stop();
    ironic.stop();
  }
  const row = (what: string, values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return [
      what,
      String(sorted.length),
      percentile(sorted, 50).toFixed(0),
      sorted[sorted.length - 1]!.toFixed(0),
    ];
  };
  printTable(
    `Failover of a real child after kill -9 of the active supervisor (TTL ${TTL_MS} ms, ${ROUNDS} rounds; ` +
      "the stand-in's start-up — python, oslo.config, openstacksdk — is in the second row)",
    ["from kill -9 to", "rounds", "median ms", "worst ms"],
    [
      row("the standby's keeper holds the lease", leaseMs),
      row("the standby's stand-in's first write accepted by Ironic", writeMs),
    ],
  );
  printTable(
    `Handover after SIGTERM to the active supervisor (TTL ${TTL_MS} ms, ${ROUNDS} rounds): the lease released, ` +
      "the waiting standby granted at once",
    ["from SIGTERM to", "rounds", "median ms", "worst ms"],
    [
      row("the standby's keeper holds the lease", handoverMs),
      row("the standby's child started", handoverChildMs),
    ],
  );
}
