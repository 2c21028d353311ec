import type { ModeReport, SimulationReport } from "./simulate.js";
import { reportTable } from "./report.js";

const escape = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** Colours per agent, golden-angle apart in hue, so neighbouring ids never look alike. */
function palette(agents: Iterable<string>): (agent: string) => string {
  const index = new Map<string, number>();
  for (const agent of agents) if (!index.has(agent)) index.set(agent, index.size);
  return (agent) => `hsl(${Math.round(((index.get(agent) ?? 0) * 137.508) % 360)} 65% 48%)`;
}

const WIDTH = 1000;
const LEFT = 110;
const LANE = 16;

function faultMarks(report: SimulationReport, height: number, x: (s: number) => number): string {
  return report.faults
    .map(
      (f) =>
        `<line x1="${x(f.atS)}" x2="${x(f.atS)}" y1="0" y2="${height}" stroke="#c00" stroke-dasharray="3 3">` +
        `<title>${escape(`${f.atS} s: ${f.label}`)}</title></line>`,
    )
    .join("");
}

/** Lanes: who is active (shards) or managing nodes (ring) over time. */
function lanes(report: SimulationReport, mode: ModeReport): string {
  const names = [...new Set(mode.activity.map((a) => a.lane))];
  const height = names.length * LANE + 20;
  const x = (s: number) => LEFT + (s / report.durationS) * (WIDTH - LEFT - 10);
  const colourOf = palette(mode.activity.map((a) => a.agent).sort());
  const bars = mode.activity
    .map((a) => {
      const y = names.indexOf(a.lane) * LANE;
      const label = `${a.lane}: ${a.agent} ${a.fromS}–${a.toS} s${a.nodes !== undefined ? `, ${a.nodes} nodes` : ""}`;
      return (
        `<rect x="${x(a.fromS)}" y="${y + 2}" width="${Math.max(1, x(a.toS) - x(a.fromS))}" height="${LANE - 4}" ` +
        `fill="${colourOf(a.agent)}"><title>${escape(label)}</title></rect>`
      );
    })
    .join("");
  const labels = names
    .map((n, i) => `<text x="0" y="${i * LANE + 12}" font-size="11">${escape(n)}</text>`)
    .join("");
  return `<svg width="${WIDTH}" height="${height}">${labels}${bars}${faultMarks(report, height - 20, x)}</svg>`;
}

/** Nodes unmanaged (grey) and double-managed (red) over time, as steps. */
function overTime(report: SimulationReport, mode: ModeReport): string {
  const height = 140;
  const x = (s: number) => LEFT + (s / report.durationS) * (WIDTH - LEFT - 10);
  const peak = Math.max(1, ...mode.series.map((p) => Math.max(p.unmanaged, p.doubleManaged)));
  const y = (n: number) => height - 20 - (n / peak) * (height - 30);
  const path = (pick: (p: ModeReport["series"][number]) => number) => {
    let d = "";
    let lastY = y(0);
    for (const p of mode.series) {
      const px = x(p.atUs / 1e6);
      d += d === "" ? `M${px},${y(pick(p))}` : `L${px},${lastY}L${px},${y(pick(p))}`;
      lastY = y(pick(p));
    }
    return `${d}L${x(report.durationS)},${lastY}`;
  };
  return (
    `<svg width="${WIDTH}" height="${height}">` +
    `<text x="0" y="12" font-size="11">${peak} nodes</text><text x="0" y="${height - 20}" font-size="11">0</text>` +
    `<path d="${path((p) => p.unmanaged)}" fill="none" stroke="#666"/>` +
    `<path d="${path((p) => p.doubleManaged)}" fill="none" stroke="#d00"/>` +
    faultMarks(report, height - 20, x) +
    `<text x="${LEFT}" y="${height - 4}" font-size="11">0 s</text>` +
    `<text x="${WIDTH - 60}" y="${height - 4}" font-size="11">${report.durationS} s</text></svg>`
  );
}

/** A self-contained page an operator can open: the numbers, and per mode the two charts. */
export function reportHtml(report: SimulationReport): string {
  const section = (title: string, mode: ModeReport, laneTitle: string) =>
    `<h2>${escape(title)}</h2><h3>${escape(laneTitle)}</h3>${lanes(report, mode)}` +
    `<h3>Nodes unmanaged (grey) and double-managed (red) over time</h3>${overTime(report, mode)}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>shardbridge simulate: ${escape(report.scenario)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1040px}pre{background:#f4f4f4;padding:1em}svg{display:block;margin-bottom:1em}</style>
</head><body>
<h1>${escape(report.scenario)}</h1>
<pre>${escape(reportTable(report))}</pre>
<p>Red dashed lines: faults (hover for what). Hover a bar for who, when, and how many nodes.</p>
${section("Shards with active/passive leases", report.shardsMode, "Active agent per shard (first 24 shards)")}
${section("nova's hash ring", report.legacyMode, "Agents managing nodes (first 24 agents)")}
</body></html>
`;
}
