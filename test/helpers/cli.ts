import { execFile, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { ShardbridgeCommand } from "../../src/tools/chaos/runner.js";

const execFileAsync = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The newest modification time of any file under `dir`, in ms. */
function newestIn(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestIn(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Whether dist/ holds a build of the sources as they are: built after the last change
 * under src/ (npm run build writes dist/build-info.json last), from the commit checked out.
 */
function distIsCurrent(): boolean {
  const stamp = join(ROOT, "dist", "build-info.json");
  if (!existsSync(stamp) || statSync(stamp).mtimeMs < newestIn(join(ROOT, "src"))) return false;
  const { commit } = JSON.parse(readFileSync(stamp, "utf8")) as { commit: string | null };
  const head = spawnSync("git", ["-C", ROOT, "rev-parse", "--short=12", "HEAD"], { encoding: "utf8" });
  return commit === (head.status === 0 ? head.stdout.trim() : null);
}

/**
 * The shardbridge command as the tests run it. `make test` builds first, and the build
 * starts in a third of tsx's time (0.6 s against 1.8 s here), which the suite pays for
 * every command and process it runs; a build older than the sources is never used —
 * then node runs src/cli.ts with tsx.
 */
export const SHARDBRIDGE: ShardbridgeCommand = distIsCurrent()
  ? { command: process.execPath, args: [join(ROOT, "dist", "cli.js")] }
  : { command: process.execPath, args: ["--import", "tsx", join(ROOT, "src", "cli.ts")] };

/**
 * Run a shardbridge command to its end as a child process: its exit status and output.
 * Asynchronous, so an app this test process serves can answer the command meanwhile.
 */
export async function runShardbridge(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  /** killed (status null) past this: for a command that must end on its own, such as a refusal */
  timeoutMs = 120_000,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(SHARDBRIDGE.command, [...SHARDBRIDGE.args, ...args], {
      encoding: "utf8",
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
      timeout: timeoutMs,
    });
    return { status: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { status: failed.code ?? null, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}
