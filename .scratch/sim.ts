import { readFileSync } from "node:fs";
import { parseScenario } from "../src/sim/scenario.ts";
import { simulate } from "../src/sim/simulate.ts";
const file = process.argv[2]!;
const s = parseScenario(readFileSync(file, "utf8"), file);
const t = performance.now();
const r = simulate(s);
const strip = (m: any) => ({ ...m, series: m.series.length, activity: m.activity.length });
console.log(JSON.stringify({ ...r, shardsMode: strip(r.shardsMode), legacyMode: strip(r.legacyMode) }, null, 1), performance.now() - t);
