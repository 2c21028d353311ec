import { renderTable } from "../text/table.js";
import type { ModeReport, SimulationReport } from "./simulate.js";

const fixed = (n: number, digits: number) =>
  n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** The terminal table: one row per metric, one column per mode. */
export function reportTable(report: SimulationReport): string {
  const { shardsMode: s, legacyMode: l } = report;
  const row = (name: string, pick: (m: ModeReport) => string) => [name, pick(s), pick(l)];
  const minutes =
    report.durationS >= 120 ? `${fixed(report.durationS / 60, 1)} min` : `${report.durationS} s`;
  return (
    `simulate: ${report.scenario} (${report.nodes.toLocaleString("en-US")} nodes, ${report.shards} shards, ` +
    `${report.agents} agents, lease TTL ${report.leaseTtlMs / 1000} s, ${minutes}, seed ${report.seed})\n\n` +
    renderTable(
      ["", "shards + leases", "nova's ring"],
      [
        row("unmanaged node-seconds", (m) => fixed(m.unmanagedNodeSeconds, 1)),
        row("double-managed node-seconds", (m) => fixed(m.doubleManagedNodeSeconds, 1)),
        row("nodes moved", (m) => m.nodesMoved.toLocaleString("en-US")),
        row("worst time to recover, s", (m) => fixed(m.worstRecoveryS, 2)),
        row("p99 time to recover, s", (m) => fixed(m.p99RecoveryS, 2)),
        row("stale writes refused by fencing", (m) =>
          m.staleWritesRefused === null ? "n/a" : String(m.staleWritesRefused),
        ),
        row("events simulated", (m) => m.events.toLocaleString("en-US")),
      ],
    ) +
    "\nunmanaged: nodes no agent believes it may act on; double-managed: nodes two or more agents act on\n" +
    "(split-brain exposure); time to recover: one node's unmanaged spell; nova's ring has no fencing.\n"
  );
}
