import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { AgentProcess } from "../agent-process.js";
import type { BridgeProcess } from "../bridge-process.js";
import { SHARDBRIDGE } from "../cli.js";
import type { OpenStackCloud } from "./cloud.js";
import { openstackBin } from "./venv.js";

/**
 * `shardbridge run --id HOST --shard SHARD -- nova-compute` in a session of its own (so a
 * test can stop or kill the whole group), with the cloud's nova.conf and a state folder of
 * the host's own, as on a machine of its own; `env` more of nova's options (OS_SECTION__OPTION).
 */
export function superviseNovaCompute(
  cloud: OpenStackCloud,
  bridge: BridgeProcess,
  host: string,
  shard: string,
  env: NodeJS.ProcessEnv = {},
): AgentProcess {
  const state = join(cloud.dir, host);
  mkdirSync(state, { recursive: true });
  return AgentProcess.spawnCommand(
    host,
    "setsid",
    [
      ...[SHARDBRIDGE.command, ...SHARDBRIDGE.args, "run", "--id", host, "--shard", shard],
      ...["--bridge", bridge.url, "--tokens-file", bridge.tokensFile, "--"],
      ...[openstackBin("nova-compute"), "--config-file", cloud.novaConf],
    ],
    { ...env, OS_DEFAULT__STATE_PATH: state },
  );
}
