import { renderTable } from "../../runtime/text/table.js";
import type { ModeReport, SimulationReport } from "./simulate.js";

const fixed = (n: number, digits: number) =>
  n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** One headline number of both modes: as a number (null: not measured) and as the table writes it. */
export interface HeadlineNumber {
  name: string;
  shards: { value: number | null; text: string };
  legacy: { value: number | null; text: string };
}

/** The report's headline numbers, in the table's order and words. */
export function headlineNumbers(report: SimulationReport): HeadlineNumber[] {
  const { shardsMode: s, legacyMode: l } = report;
  const row = (name: string, pick: (m: ModeReport) => number | null, write: (n: number) => string) => {
    const of = (m: ModeReport) => {
      const value = pick(m);
      return { value, text: value === null ? "n/a" : write(value) };
    };
    return { name, shards: of(s), legacy: of(l) };
  };
  const count = (n: number) => n.toLocaleString("en-US");
  return [
    row(
      "unmanaged node-seconds",
      (m) => m.unmanagedNodeSeconds,
      (n) => fixed(n, 1),
    ),
    row(
      "double-managed node-seconds",
      (m) => m.doubleManagedNodeSeconds,
      (n) => fixed(n, 1),
    ),
    row("nodes moved", (m) => m.nodesMoved, count),
    row(
      "worst time to recover, s",
      (m) => m.worstRecoveryS,
      (n) => fixed(n, 2),
    ),
    row(
      "p99 time to recover, s",
      (m) => m.p99RecoveryS,
      (n) => fixed(n, 2),
    ),
    row("stale writes refused by fencing", (m) => m.staleWritesRefused, String),
    row("events simulated", (m) => m.events, count),
  ];
}

/** The fleet and run a report is about, in one line. */
export function reportSubject(report: SimulationReport): string {
  const minutes =
    report.durationS >= 120 ? `${fixed(report.durationS / 60, 1)} min` : `${report.durationS} s`;
  return (
    `${report.nodes.toLocaleString("en-US")} nodes, ${report.shards} shards, ` +
    `${report.agents} agents, lease TTL ${report.leaseTtlMs / 1000} s, ${minutes}, seed ${report.seed}`
  );
}

/** The terminal table: one row per metric, one column per mode. */
export function reportTable(report: SimulationReport): string {
  return (
    `simulate: ${report.scenario} (${reportSubject(report)})\n\n` +
    renderTable(
      ["", "shards + leases", "nova's ring"],
      headlineNumbers(report).map((h) => [h.name, h.shards.text, h.legacy.text]),
    ) +
    "\nunmanaged: nodes no agent believes it may act on; double-managed: nodes two or more agents act on\n" +
    "(split-brain exposure); time to recover: one node's unmanaged spell; nova's ring has no fencing.\n"
  );
}
