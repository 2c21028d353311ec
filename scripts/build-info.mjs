// Records which commit a build came from, for `shardbridge --version` and /healthz
// (src/runtime/version.ts reads dist/build-info.json; null outside a git checkout).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";

// A build without its git directory (a container image) is told the commit instead.
const given = process.env.SHARDBRIDGE_COMMIT;
const git = spawnSync("git", ["rev-parse", "--short=12", "HEAD"], { encoding: "utf8" });
const commit = given ? given : git.status === 0 ? git.stdout.trim() : null;
writeFileSync("dist/build-info.json", `${JSON.stringify({ commit })}\n`);
