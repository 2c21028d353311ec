// Records which commit a build came from, for `shardbridge --version` and /healthz
// (src/version.ts reads dist/build-info.json; null outside a git checkout).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";

const git = spawnSync("git", ["rev-parse", "--short=12", "HEAD"], { encoding: "utf8" });
const commit = git.status === 0 ? git.stdout.trim() : null;
writeFileSync("dist/build-info.json", `${JSON.stringify({ commit })}\n`);
