import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Which build this is: the package version and, when built from (or run in) git, the commit. */
export interface VersionInfo {
  version: string;
  commit: string | null;
}

const root = fileURLToPath(new URL("../../", import.meta.url));
let cached: VersionInfo | undefined;

/**
 * The package version from package.json, and the commit `npm run build` recorded in
 * dist/build-info.json — or, run from the sources of a git checkout, the checkout's own.
 */
export function versionInfo(): VersionInfo {
  if (cached !== undefined) return cached;
  const pkg = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as { version: string };
  cached = { version: pkg.version, commit: recordedCommit() ?? checkoutCommit() };
  return cached;
}

function recordedCommit(): string | null {
  const file = fileURLToPath(new URL("../build-info.json", import.meta.url));
  if (!existsSync(file)) return null;
  try {
    const { commit } = JSON.parse(readFileSync(file, "utf8")) as { commit?: unknown };
    return typeof commit === "string" && commit !== "" ? commit : null;
  } catch {
    return null;
  }
}

function checkoutCommit(): string | null {
  if (!existsSync(`${root}.git`)) return null;
  const git = spawnSync("git", ["-C", root, "rev-parse", "--short=12", "HEAD"], {
    encoding: "utf8",
    timeout: 5000,
  });
  return git.status === 0 ? git.stdout.trim() || null : null;
}

/** "shardbridge 0.1.0 (commit 1234abcd5678)" */
export function versionLine(): string {
  const { version, commit } = versionInfo();
  return `shardbridge ${version}${commit === null ? "" : ` (commit ${commit})`}`;
}
