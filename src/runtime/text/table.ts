/** A plain text table: numeric columns right-aligned, others left-aligned, a rule under the header. */
export function renderTable(header: string[], rows: Array<Array<string | number>>): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, c) => Math.max(...cells.map((row) => row[c]!.length)));
  const numeric = header.map(
    (_, c) => rows.length > 0 && rows.every((r) => /^-?[\d.,]+$|^\|$|^n\/a$/.test(String(r[c]))),
  );
  const line = (row: string[]) =>
    row
      .map((cell, c) => (numeric[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join("  ")
      .trimEnd();
  return (
    [line(cells[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join("\n") +
    "\n"
  );
}
