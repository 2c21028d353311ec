import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";

/** The sections of an oslo.config file, as its text. */
export function conf(sections: Record<string, Record<string, string | number | boolean>>): string {
  return Object.entries(sections)
    .map(([name, options]) =>
      [`[${name}]`, ...Object.entries(options).map(([k, v]) => `${k} = ${v}`)].join("\n"),
    )
    .join("\n\n");
}

/**
 * Run a set-up command (a db sync) to its end, its output appended to `log`; reject with
 * the log's tail if it fails. Asynchronous, so the services' set-ups run side by side.
 */
export function setUp(what: string, command: string, args: string[], log: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = openSync(log, "a");
    const child = spawn(command, args, { stdio: ["ignore", out, out] });
    closeSync(out);
    const timer = setTimeout(() => child.kill("SIGKILL"), 300_000);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`${what}: ${error.message}`));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve();
      reject(new Error(`${what} failed (${code ?? signal}): ${readFileSync(log, "utf8").slice(-2000)}`));
    });
  });
}

/** Whether `url` answers 2xx within 2 s. */
export async function answers(url: string, headers: Record<string, string> = {}): Promise<boolean> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(2000) });
  return res.ok;
}
