import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parseScenario } from "../tools/sim/scenario.js";
import { simulate, simulateShippedKeepers } from "../tools/sim/simulate.js";
import { reportTable } from "../tools/sim/report.js";
import { reportHtml } from "../tools/sim/html.js";
import { tuneHeapForSimulation } from "../tools/sim/heap.js";
import { integerFlag } from "./io.js";
import { ConfigError } from "../runtime/config.js";

export const SIMULATE_USAGE = `  simulate SCENARIO  play a failover scenario (examples/scenarios/) under shards with leases and under
                     nova's ring, on a virtual clock: same scenario and seed, same result
             --seed N        override the scenario's seed
             --json          the whole report as JSON
             --html FILE     a page with a timeline per mode (who is active, nodes unmanaged over time)
             --progress      a progress bar on stderr (the default when stderr is a terminal)
             --shipped-keepers  each agent's keepers the shipped LeaseKeeper (its timers, timeouts,
                             release on stop) instead of the simulator's fast driver of the same
                             rules: every poll and timer an event, ~10x slower; another report
`;

/** A one-line progress bar on stderr, redrawn at most 10 times a second. */
function progressBar(): (fraction: number) => void {
  let lastDraw = 0;
  return (fraction) => {
    const now = performance.now();
    if (fraction < 1 && now - lastDraw < 100) return;
    lastDraw = now;
    const width = 30;
    const filled = Math.round(fraction * width);
    process.stderr.write(
      `\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${Math.floor(fraction * 100)}%`,
    );
    if (fraction >= 1) process.stderr.write("\n");
  };
}

export async function simulateCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      seed: { type: "string" },
      json: { type: "boolean", default: false },
      html: { type: "string" },
      progress: { type: "boolean", default: process.stderr.isTTY === true },
      "shipped-keepers": { type: "boolean", default: false },
    },
  });
  if (positionals.length !== 1)
    throw new ConfigError("simulate: name one scenario file, e.g. examples/scenarios/single-crash.json");
  const file = positionals[0]!;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`${file}: ${(error as Error).message}`);
  }
  const scenario = parseScenario(text, file);
  const seed = integerFlag("seed", values.seed, 0, 2 ** 32 - 1);
  if (seed !== undefined) scenario.seed = seed;
  tuneHeapForSimulation();
  const started = performance.now();
  const progress = values.progress ? progressBar() : undefined;
  const report = values["shipped-keepers"]
    ? await simulateShippedKeepers(scenario, progress)
    : simulate(scenario, progress);
  const wallS = (performance.now() - started) / 1000;
  if (values.html !== undefined) writeFileSync(values.html, reportHtml(report));
  if (values.json) {
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } else {
    process.stdout.write(reportTable(report));
    if (values.html !== undefined) process.stdout.write(`timeline: ${values.html}\n`);
  }
  // Wall time varies run to run: stderr only, so stdout is the same for the same seed.
  const events = report.shardsMode.events + report.legacyMode.events;
  process.stderr.write(
    `simulated in ${wallS.toFixed(2)} s (${Math.round(events / wallS).toLocaleString("en-US")} events/s)\n`,
  );
}
