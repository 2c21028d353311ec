import { parseArgs } from "node:util";
import { BridgeClient } from "../agent/bridge-client.js";
import {
  AGENT_COLUMNS,
  SHARD_COLUMNS,
  agentRow,
  headline,
  ironicLine,
  shardRow,
  type StatusSnapshot,
} from "../api/ui/status-view.js";
import { ConfigError } from "../runtime/config.js";
import { renderTable } from "../runtime/text/table.js";
import { BRIDGE_FLAG, BRIDGE_USAGE, httpUrlFlag, integerFlag, tokenFlag } from "./io.js";

export type { StatusSnapshot };

export const STATUS_USAGE = `  status   which agent holds which shard, since when and for how long more, and how far its
             holder lags behind its trait feed; which agents are up; how far delivery to Ironic lags
${BRIDGE_USAGE}             --token T       an admin token shows lease tokens, any other hides them (env SHARDBRIDGE_TOKEN)
             --watch [S]     redraw every S seconds (default 2), in place on a terminal
             --json          one JSON document {"at","shards","agents","ironic"} (with --watch: one a line)
`;

/** The snapshot as the aligned tables an operator reads: shards first, then agents. */
export function statusTable(snapshot: StatusSnapshot): string {
  const now = Date.parse(snapshot.at);
  const table = <Row extends object>(columns: Record<keyof Row, string>, rows: Row[]) => {
    const keys = Object.keys(columns) as Array<keyof Row>;
    return renderTable(
      keys.map((k) => columns[k]),
      rows.map((row) => keys.map((k) => row[k] as string)),
    );
  };
  const shards = table(
    SHARD_COLUMNS,
    snapshot.shards.map((s) => shardRow(s, now)),
  );
  const agents = table(
    AGENT_COLUMNS,
    snapshot.agents.map((a) => agentRow(a, now)),
  );
  return `${snapshot.at}  ${headline(snapshot)}\n${ironicLine(snapshot.ironic)}\n\n${shards}\n${agents}`;
}

async function look(client: BridgeClient): Promise<StatusSnapshot> {
  const [shards, { agents, downAfterMs }, ironic] = await Promise.all([
    client.shards(),
    client.agents(),
    client.ironicDelivery(),
  ]);
  return { at: new Date().toISOString(), shards, agents, down_after_ms: downAfterMs, ironic };
}

/** `shardbridge status`: the bridge's view of shards and agents, once or redrawn. */
export async function statusCommand(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      bridge: BRIDGE_FLAG,
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
      watch: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  if (!values.token) throw new ConfigError("status: pass --token or set SHARDBRIDGE_TOKEN");
  if (positionals.length > 1 || (positionals.length === 1 && !values.watch))
    throw new ConfigError(`status: unexpected ${positionals.join(" ")}`);
  const everyS = values.watch ? (integerFlag("watch", positionals[0] ?? "2", 1, 3600) ?? 2) : 0;
  const client = new BridgeClient(
    httpUrlFlag("bridge", values.bridge, "SHARDBRIDGE_URL"),
    tokenFlag(values.token),
  );
  const show = (snapshot: StatusSnapshot) => {
    if (values.json) return void process.stdout.write(`${JSON.stringify(snapshot)}\n`);
    // On a terminal, draw over the last picture; into a pipe or a file, one after another.
    const clear = values.watch && process.stdout.isTTY === true ? "\x1b[H\x1b[2J" : "";
    process.stdout.write(`${clear}${statusTable(snapshot)}${values.watch && clear === "" ? "\n" : ""}`);
  };
  show(await look(client));
  if (!values.watch) return;
  for (;;) {
    await new Promise((r) => setTimeout(r, everyS * 1000));
    try {
      show(await look(client));
    } catch (error) {
      // A bridge restarting is what an operator watches for: say so and keep watching.
      process.stderr.write(`shardbridge status: ${(error as Error).message}\n`);
    }
  }
}
