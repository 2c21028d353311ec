import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { ShardbridgeCommand } from "../../src/chaos/runner.js";

const execFileAsync = promisify(execFile);

/** The shardbridge command as the tests run it: node with tsx on the source. */
export const SHARDBRIDGE: ShardbridgeCommand = {
  command: process.execPath,
  args: ["--import", "tsx", fileURLToPath(new URL("../../src/cli.ts", import.meta.url))],
};

/**
 * Run a shardbridge command to its end as a child process: its exit status and output.
 * Asynchronous, so an app this test process serves can answer the command meanwhile.
 */
export async function runShardbridge(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(SHARDBRIDGE.command, [...SHARDBRIDGE.args, ...args], {
      encoding: "utf8",
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
      timeout: 120_000,
    });
    return { status: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { status: failed.code ?? null, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}
