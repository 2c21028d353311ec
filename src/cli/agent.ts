import { parseArgs } from "node:util";
import { z } from "zod";
import { runReferenceAgent } from "../agent/reference-agent.js";
import {
  AGENT_FLAGS,
  BRIDGE_USAGE,
  STANDBY_POLL_USAGE,
  agentToken,
  flagsOrThrow,
  httpUrlFlag,
  standbyPollMs,
} from "./io.js";
import { AgentId, ShardName } from "../core/names.js";
import { onStopSignal } from "./signals.js";

/** `shardbridge agent`: the reference compute agent. */
export const AGENT_USAGE = `  agent    run the reference compute agent for one shard
             --id HOST       this agent's id (nova-compute's host)
             --shard NAME    the shard to serve
${BRIDGE_USAGE}             --token T       this agent's bearer token (env SHARDBRIDGE_TOKEN), or
             --tokens-file F take it from a tokens file (the agent entry for --id)
${STANDBY_POLL_USAGE}`;

export async function agentCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: AGENT_FLAGS });
  const { id, shard } = flagsOrThrow(z.strictObject({ id: AgentId, shard: ShardName }), {
    id: values.id,
    shard: values.shard,
  });
  const pollMs = standbyPollMs(values["standby-poll"]);
  const running = runReferenceAgent({
    id,
    shard,
    bridge: httpUrlFlag("bridge", values.bridge, "SHARDBRIDGE_URL"),
    token: agentToken(id, values.token, values["tokens-file"]),
    ...(pollMs !== undefined && { standbyPollMs: pollMs }),
  });
  onStopSignal("agent", () => void running.stop().then(() => process.exit(0)));
}
