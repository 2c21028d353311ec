import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { runChaos, type ChaosReport } from "../tools/chaos/runner.js";
import { parseScenario, type Scenario } from "../tools/sim/scenario.js";
import { simulate } from "../tools/sim/simulate.js";
import { integerFlag } from "./io.js";
import { renderTable } from "../runtime/text/table.js";
import { ConfigError } from "../runtime/config.js";

export const CHAOS_USAGE = `  chaos SCENARIO  play a scenario against real processes (its own redis-server, a bridge, reference agents)
                  with kill -9, SIGSTOP/SIGCONT, SIGTERM, a Redis restart and a Redis failover to a lagging
                  replica, measured from the agents' logs,
                  beside the simulator's prediction for the same scenario
             --seeds N       seeds the prediction's range is taken over (default 20)
             --json          both, as JSON
`;

/** What the simulator predicts for the shard side: the scenario's own seed, and the range over `seeds` seeds. */
export function predict(scenario: Scenario, seeds: number) {
  const runs = Array.from(
    { length: seeds },
    (_, i) => simulate({ ...scenario, seed: scenario.seed + i }).shardsMode,
  );
  const range = (pick: (m: (typeof runs)[number]) => number) => {
    const values = runs.map(pick);
    return { min: Math.min(...values), max: Math.max(...values) };
  };
  return {
    seeds,
    worstRecoveryS: range((m) => m.worstRecoveryS),
    unmanagedNodeSeconds: range((m) => m.unmanagedNodeSeconds),
    doubleManagedNodeSeconds: range((m) => m.doubleManagedNodeSeconds),
    nodesMoved: range((m) => m.nodesMoved),
  };
}

function table(real: ChaosReport, predicted: ReturnType<typeof predict>): string {
  const r = (x: { min: number; max: number }, digits: number) =>
    `${x.min.toFixed(digits)} – ${x.max.toFixed(digits)}`;
  return (
    `chaos: ${real.scenario} (${real.durationS} s, shards with leases, real processes)\n\n` +
    renderTable(
      ["", "measured", `simulated (${predicted.seeds} seeds)`],
      [
        [
          "unmanaged node-seconds",
          real.unmanagedNodeSeconds.toFixed(1),
          r(predicted.unmanagedNodeSeconds, 1),
        ],
        [
          "double-managed node-seconds",
          real.doubleManagedNodeSeconds.toFixed(1),
          r(predicted.doubleManagedNodeSeconds, 1),
        ],
        ["nodes moved", String(real.nodesMoved), r(predicted.nodesMoved, 0)],
        ["worst time to recover, s", real.worstRecoveryS.toFixed(2), r(predicted.worstRecoveryS, 2)],
        ["p99 time to recover, s", real.p99RecoveryS.toFixed(2), ""],
        ["failovers, s", real.failoversS.map((f) => f.toFixed(2)).join(" ") || "-", ""],
        ["renewals refused (the holder told to stop)", String(real.renewalsRefused), ""],
        ...(real.failoverLagSeen.length === 0
          ? []
          : [
              [
                "Redis failovers: promoted server lacked the lag's writes",
                real.failoverLagSeen.map((seen) => (seen ? "yes" : "NO")).join(" "),
                "",
              ],
            ]),
      ],
    ) +
    (real.skipped.length > 0 ? `\nskipped (needs root to make for real): ${real.skipped.join("; ")}\n` : "")
  );
}

export async function chaosCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { seeds: { type: "string", default: "20" }, json: { type: "boolean", default: false } },
  });
  if (positionals.length !== 1) throw new ConfigError("chaos: name one scenario file");
  const file = positionals[0]!;
  const scenario = parseScenario(readFileSync(file, "utf8"), file);
  const seeds = integerFlag("seeds", values.seeds, 1, 1000)!;
  const predicted = predict(scenario, seeds);
  const real = await runChaos(scenario, (line) => process.stderr.write(`${line}\n`));
  process.stdout.write(values.json ? `${JSON.stringify({ real, predicted })}\n` : table(real, predicted));
}
