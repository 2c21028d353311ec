import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";

/** The sections of an oslo.config file, as its text. */
export function conf(sections: Record<string, Record<string, string | number | boolean>>): string {
  return Object.entries(sections)
    .map(([name, options]) =>
      [`[${name}]`, ...Object.entries(options).map(([k, v]) => `${k} = ${v}`)].join("\n"),
    )
    .join("\n\n");
}

/** Run a set-up command (a db sync) to its end, its output appended to `log`; throw with its words if it fails. */
export function syncOrThrow(what: string, command: string, args: string[], log: string): void {
  const run = spawnSync(command, args, { encoding: "utf8", timeout: 300_000 });
  writeFileSync(log, `${run.stdout}\n${run.stderr}`, { flag: "a" });
  if (run.status !== 0) throw new Error(`${what} failed (${run.status}): ${run.stderr.slice(-2000)}`);
}

/** Whether `url` answers 2xx within 2 s. */
export async function answers(url: string, headers: Record<string, string> = {}): Promise<boolean> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(2000) });
  return res.ok;
}
