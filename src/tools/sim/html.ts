import type { ModeReport, SimulationReport } from "./simulate.js";
import { headlineNumbers, reportSubject, reportTable } from "./report.js";

/*
 * The simulator's page (`simulate --html FILE`): one self-contained file an operator opens,
 * no script. The two modes' headline numbers side by side as a chart and a table, the
 * faults, a legend of agent colours, then per mode who was active when and how many
 * nodes were unmanaged or double-managed, on one time axis with ticks.
 */

const escape = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** Colours per agent, golden-angle apart in hue, so neighbouring ids never look alike. */
function palette(agents: Iterable<string>): (agent: string) => string {
  const index = new Map<string, number>();
  for (const agent of agents) if (!index.has(agent)) index.set(agent, index.size);
  return (agent) => `hsl(${Math.round(((index.get(agent) ?? 0) * 137.508) % 360)} 65% 48%)`;
}

/** The two modes' colours, in the headline chart and its legend. */
const MODE_COLOURS = { shards: "#2f6fde", legacy: "#e0802c" };
const UNMANAGED = "#666";
const DOUBLE_MANAGED = "#d00";

const WIDTH = 1000;
const LEFT = 110;
const RIGHT = 30;
const LANE = 16;
/** Height of the time axis under a chart: its ticks and their labels. */
const AXIS = 22;
/** How many agents the colour legend names at most (the 10,000-node fleet has 1,000). */
const LEGEND_MAX = 48;

/** A time on the axis: seconds under two minutes, then minutes, then h:mm. */
function timeLabel(s: number, durationS: number): string {
  if (durationS < 120) return `${s} s`;
  if (durationS < 7200) return `${+(s / 60).toFixed(1)} min`;
  return `${Math.floor(s / 3600)}:${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} h`;
}

/** Round tick steps, seconds: the smallest that gives at most ten ticks. */
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400];

export function timeTicks(durationS: number): Array<{ atS: number; label: string }> {
  const step = STEPS.find((s) => durationS / s <= 10) ?? Math.ceil(durationS / 10);
  const ticks = [];
  for (let atS = 0; atS <= durationS + 1e-9; atS += step)
    ticks.push({ atS, label: timeLabel(atS, durationS) });
  return ticks;
}

const xOf = (report: SimulationReport) => (s: number) =>
  LEFT + (s / report.durationS) * (WIDTH - LEFT - RIGHT);

/** The time axis at `y`: a line, ticks with labels, and faint grid lines up to the top. */
function timeAxis(report: SimulationReport, y: number): string {
  const x = xOf(report);
  return (
    `<g class="axis"><line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y}" y2="${y}" stroke="#999"/>` +
    timeTicks(report.durationS)
      .map(
        (t) =>
          `<line x1="${x(t.atS)}" x2="${x(t.atS)}" y1="0" y2="${y}" stroke="#eee"/>` +
          `<line x1="${x(t.atS)}" x2="${x(t.atS)}" y1="${y}" y2="${y + 4}" stroke="#999"/>` +
          `<text x="${x(t.atS)}" y="${y + 16}" font-size="11" text-anchor="middle">${escape(t.label)}</text>`,
      )
      .join("") +
    `</g>`
  );
}

/** Faults as numbered dashed lines, the numbers those of the fault list. */
function faultMarks(report: SimulationReport, height: number): string {
  const x = xOf(report);
  return report.faults
    .map(
      (f, i) =>
        `<g class="fault"><line x1="${x(f.atS)}" x2="${x(f.atS)}" y1="10" y2="${height}" stroke="#c00" stroke-dasharray="3 3"/>` +
        `<text x="${x(f.atS) + 3}" y="9" font-size="10" fill="#c00">${i + 1}</text>` +
        `<title>${escape(`${f.atS} s: ${f.label}`)}</title></g>`,
    )
    .join("");
}

/** Lanes: who is active (shards) or managing nodes (ring) over time. */
function lanes(report: SimulationReport, mode: ModeReport, colourOf: (agent: string) => string): string {
  const names = [...new Set(mode.activity.map((a) => a.lane))];
  const top = 12;
  const bottom = top + names.length * LANE;
  const x = xOf(report);
  const bars = mode.activity
    .map((a) => {
      const y = top + names.indexOf(a.lane) * LANE;
      const label = `${a.lane}: ${a.agent} ${a.fromS}–${a.toS} s${a.nodes !== undefined ? `, ${a.nodes} nodes` : ""}`;
      return (
        `<rect x="${x(a.fromS)}" y="${y + 2}" width="${Math.max(1, x(a.toS) - x(a.fromS))}" height="${LANE - 4}" ` +
        `fill="${colourOf(a.agent)}"><title>${escape(label)}</title></rect>`
      );
    })
    .join("");
  const labels = names
    .map((n, i) => `<text x="0" y="${top + i * LANE + 12}" font-size="11">${escape(n)}</text>`)
    .join("");
  return (
    `<svg class="lanes" width="${WIDTH}" height="${bottom + AXIS}">${timeAxis(report, bottom)}${labels}${bars}` +
    `${faultMarks(report, bottom)}</svg>`
  );
}

/** Nodes unmanaged and double-managed over time, as steps, with a node scale and the time axis. */
function overTime(report: SimulationReport, mode: ModeReport): string {
  const top = 12;
  const bottom = 130;
  const x = xOf(report);
  const peak = Math.max(1, ...mode.series.map((p) => Math.max(p.unmanaged, p.doubleManaged)));
  const y = (n: number) => bottom - (n / peak) * (bottom - top);
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
  const scale = [0, Math.round(peak / 2), peak]
    .map(
      (n) =>
        `<text x="${LEFT - 6}" y="${y(n) + 4}" font-size="11" text-anchor="end">${n.toLocaleString("en-US")}</text>` +
        `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y(n)}" y2="${y(n)}" stroke="#f0f0f0"/>`,
    )
    .join("");
  return (
    `<svg class="over-time" width="${WIDTH}" height="${bottom + AXIS}">${timeAxis(report, bottom)}${scale}` +
    `<text x="0" y="${top + 4}" font-size="11">nodes</text>` +
    `<path d="${path((p) => p.unmanaged)}" fill="none" stroke="${UNMANAGED}" stroke-width="1.5"/>` +
    `<path d="${path((p) => p.doubleManaged)}" fill="none" stroke="${DOUBLE_MANAGED}" stroke-width="1.5"/>` +
    `${faultMarks(report, bottom)}</svg>`
  );
}

/**
 * The headline numbers side by side: per number, a bar for each mode on a scale of its
 * own (the larger of the two is full width), the value written at its end. The numbers
 * the fencing alone has (stale writes) and the event counts stay in the table.
 */
function headlineChart(report: SimulationReport): string {
  const rows = headlineNumbers(report).filter((h) => h.shards.value !== null && h.legacy.value !== null);
  const charted = rows.filter((h) => h.name !== "events simulated");
  const labelWidth = 220;
  const barMax = WIDTH - labelWidth - 120;
  const rowHeight = 44;
  const body = charted
    .map((h, i) => {
      const top = 28 + i * rowHeight;
      const max = Math.max(h.shards.value!, h.legacy.value!);
      const bar = (which: "shards" | "legacy", offset: number) => {
        const { value, text } = h[which];
        const width = max === 0 ? 0 : (value! / max) * barMax;
        return (
          `<rect x="${labelWidth}" y="${top + offset}" width="${Math.max(width, 1.5)}" height="15" fill="${MODE_COLOURS[which]}">` +
          `<title>${escape(`${h.name}, ${which === "shards" ? "shards with leases" : "nova's ring"}: ${text}`)}</title></rect>` +
          `<text x="${labelWidth + Math.max(width, 1.5) + 6}" y="${top + offset + 12}" font-size="12">${escape(text)}</text>`
        );
      };
      return (
        `<g class="metric" data-metric="${escape(h.name)}">` +
        `<text x="0" y="${top + 20}" font-size="13">${escape(h.name)}</text>` +
        bar("shards", 2) +
        bar("legacy", 19) +
        `</g>`
      );
    })
    .join("");
  const legend =
    `<g class="legend"><rect x="${labelWidth}" y="4" width="12" height="12" fill="${MODE_COLOURS.shards}"/>` +
    `<text x="${labelWidth + 18}" y="14" font-size="12">shards with leases</text>` +
    `<rect x="${labelWidth + 160}" y="4" width="12" height="12" fill="${MODE_COLOURS.legacy}"/>` +
    `<text x="${labelWidth + 178}" y="14" font-size="12">nova's ring</text>` +
    `<text x="${WIDTH - 10}" y="14" font-size="11" text-anchor="end" fill="#666">each row on its own scale; shorter is better</text></g>`;
  return (
    `<svg class="headline" width="${WIDTH}" height="${32 + charted.length * rowHeight}" role="img" ` +
    `aria-label="Headline numbers, shards with leases against nova's ring">${legend}${body}</svg>`
  );
}

function numbersTable(report: SimulationReport): string {
  const rows = headlineNumbers(report)
    .map(
      (h) =>
        `<tr><th scope="row">${escape(h.name)}</th><td>${escape(h.shards.text)}</td><td>${escape(h.legacy.text)}</td></tr>`,
    )
    .join("");
  return (
    `<table class="numbers"><thead><tr><th></th><th scope="col">shards + leases</th><th scope="col">nova's ring</th></tr></thead>` +
    `<tbody>${rows}</tbody></table>`
  );
}

/** The agents the lanes show, each with its colour: the same colour in both modes' charts. */
function agentLegend(agents: string[], colourOf: (agent: string) => string): string {
  const shown = agents.slice(0, LEGEND_MAX);
  const items = shown
    .map(
      (a) =>
        `<li><svg width="12" height="12"><rect width="12" height="12" fill="${colourOf(a)}"/></svg>${escape(a)}</li>`,
    )
    .join("");
  const more =
    agents.length > shown.length ? `<li class="more">and ${agents.length - shown.length} more</li>` : "";
  return `<ul class="legend agents">${items}${more}</ul>`;
}

const STYLE = `body{font-family:system-ui,"DejaVu Sans",sans-serif;margin:2em;max-width:1040px;color:#222}
h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}h3{font-size:1em;margin:1.2em 0 .4em}
svg{display:block;margin-bottom:.6em}.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.2em;font-size:.9em}
.legend li{display:flex;align-items:center;gap:.4em}.legend svg{display:inline;margin:0}.legend .more{color:#666}
table.numbers{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:.6em 0}
table.numbers th,table.numbers td{padding:.25em .8em;border-bottom:1px solid #eee;text-align:right}
table.numbers th[scope=row]{text-align:left;font-weight:normal}ol.faults{padding-left:1.6em}
details pre{background:#f4f4f4;padding:1em;overflow:auto}.note{color:#555;font-size:.92em}`;

/** A self-contained page an operator can open: the numbers as a chart and a table, and per mode the two charts. */
export function reportHtml(report: SimulationReport): string {
  const modes = [report.shardsMode, report.legacyMode];
  // One colour per agent across both modes, so an agent looks the same in every chart.
  const agents = [...new Set(modes.flatMap((m) => m.activity.map((a) => a.agent)))].sort((a, b) =>
    a.localeCompare(b, "en", { numeric: true }),
  );
  const colourOf = palette(agents);
  const section = (title: string, mode: ModeReport, laneTitle: string) =>
    `<h2>${escape(title)}</h2><h3>${escape(laneTitle)}</h3>${lanes(report, mode, colourOf)}` +
    `<h3>Nodes unmanaged and double-managed over time</h3>` +
    `<ul class="legend"><li><svg width="18" height="12"><line x1="0" x2="18" y1="6" y2="6" stroke="${UNMANAGED}" stroke-width="2"/></svg>unmanaged (no agent may act on them)</li>` +
    `<li><svg width="18" height="12"><line x1="0" x2="18" y1="6" y2="6" stroke="${DOUBLE_MANAGED}" stroke-width="2"/></svg>double-managed (two or more agents act on them)</li></ul>` +
    overTime(report, mode);
  const faults =
    report.faults.length === 0
      ? `<p class="note">No faults.</p>`
      : `<ol class="faults">${report.faults.map((f) => `<li>${escape(timeLabel(f.atS, report.durationS))} (${f.atS} s): ${escape(f.label)}</li>`).join("")}</ol>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>shardbridge simulate: ${escape(report.scenario)}</title>
<style>${STYLE}</style>
</head><body>
<h1>${escape(report.scenario)}</h1>
<p>${escape(reportSubject(report))}</p>
<h2>Shards with leases against nova's ring</h2>
${headlineChart(report)}
${numbersTable(report)}
<p class="note">Unmanaged: nodes no agent believes it may act on; double-managed: nodes two or more agents act on
(split-brain exposure); time to recover: one node's unmanaged spell; nova's ring has no fencing.</p>
<details><summary>As <code>shardbridge simulate</code> prints it</summary><pre>${escape(reportTable(report))}</pre></details>
<h2>Faults</h2>
${faults}
<p class="note">Numbered red dashed lines in the charts; hover a line for the fault, a bar for who, when and how many nodes.</p>
<h2>Agent colours</h2>
${agentLegend(agents, colourOf)}
${section("Shards with active/passive leases", report.shardsMode, "Active agent per shard (first 24 shards)")}
${section("nova's hash ring", report.legacyMode, "Agents managing nodes (first 24 agents)")}
</body></html>
`;
}
