import { renderTable } from "../../src/runtime/text/table.js";
/** Small helpers shared by the benchmarks: percentiles and table printing. */

export function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return NaN;
  const index = Math.min(sortedMs.length - 1, Math.ceil((p / 100) * sortedMs.length) - 1);
  return sortedMs[Math.max(0, index)]!;
}

export interface Measured {
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Run `op` `total` times with `concurrency` callers in closed loops; measure throughput
 * and per-call latency.
 */
export async function closedLoop(
  total: number,
  concurrency: number,
  op: (i: number) => Promise<unknown>,
): Promise<Measured> {
  const latencies = new Float64Array(total);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t = performance.now();
        await op(i);
        latencies[i] = performance.now() - t;
      }
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  const sorted = Array.from(latencies).sort((a, b) => a - b);
  return { opsPerSec: total / elapsedS, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
}

export function printTable(title: string, header: string[], rows: Array<Array<string | number>>): void {
  const formatted = rows.map((r) => r.map((c) => (typeof c === "number" ? formatNumber(c) : c)));
  const body = renderTable(header, formatted)
    .trimEnd()
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n");
  process.stdout.write(`\n${title}\n${body}\n`);
}

function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return "n/a";
  // A count is a count: 8 requests, not 8.000.
  if (Number.isInteger(n) || Math.abs(n) >= 1000) return Math.round(n).toLocaleString("en-US");
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(3);
}
