import { parseArgs } from "node:util";
import { BridgeClient, type AgentSummary, type IronicDelivery, type ShardSummary } from "../agent/client.js";
import { ConfigError } from "../config.js";
import { renderTable } from "../text/table.js";
import { integerFlag } from "./io.js";

export const STATUS_USAGE = `  status   which agent holds which shard, since when and for how long more, and how far its
             holder lags behind its trait feed; which agents are up; how far delivery to Ironic lags
             --bridge URL    the bridge (default $SHARDBRIDGE_URL or http://127.0.0.1:6390)
             --token T       an admin token shows lease tokens, any other hides them (env SHARDBRIDGE_TOKEN)
             --watch [S]     redraw every S seconds (default 2), in place on a terminal
             --json          one JSON document {"at","shards","agents","ironic"} (with --watch: one a line)
`;

/** What one look at the bridge found. */
export interface StatusSnapshot {
  at: string;
  shards: ShardSummary[];
  agents: AgentSummary[];
  down_after_ms: number;
  ironic: IronicDelivery;
}

/** A duration as the tables show it: "5.4 s". */
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** One line on delivery to Ironic: its lag first, what an operator acts on. */
function ironicLine(ironic: IronicDelivery): string {
  if (!ironic.configured) return "Ironic delivery: not configured (no --ironic)";
  const { pending_changes: pending, oldest_pending_ms: oldestMs, batches } = ironic;
  const waiting =
    pending === 0 ? "nothing pending" : `${pending} trait changes pending, the oldest ${seconds(oldestMs)}`;
  return (
    `Ironic delivery: ${waiting}; ${batches.delivered} batches delivered, ${batches.retried} retried, ` +
    `${batches.given_up} given up${ironic.durable ? "" : " (kept in the bridge's memory only)"}`
  );
}

/** "42 s ago", "3 min ago", "2 h ago": how long before `now` an ISO time was. */
function ago(iso: string | null, nowMs: number): string {
  if (iso === null) return "never";
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

/** The snapshot as the aligned tables an operator reads: shards first, then agents. */
export function statusTable(snapshot: StatusSnapshot): string {
  const now = Date.parse(snapshot.at);
  const shards = renderTable(
    ["SHARD", "NODES", "HOLDER", "TOKEN", "LEFT", "SINCE", "FEED LAG"],
    snapshot.shards.map((s) => [
      s.name,
      s.count,
      s.lease?.holder ?? "-",
      s.lease === null ? "-" : (s.lease.token ?? "(hidden)"),
      s.lease === null ? "-" : seconds(s.lease.ttl_ms),
      s.lease === null ? "-" : `${s.lease.since.slice(11, 19)} (${ago(s.lease.since, now)})`,
      s.feed_lag_ms === null ? "-" : s.feed_lag_ms === 0 ? "caught up" : seconds(s.feed_lag_ms),
    ]),
  );
  const agents = renderTable(
    ["AGENT", "STATE", "HOLDS", "SERVES", "LAST SEEN"],
    snapshot.agents.map((a) => [
      a.id,
      a.up ? "up" : "down",
      a.shards.join(",") || "-",
      // An agent may declare shards and still be in nova's pool: its shards carry no nodes
      // yet, or a migration is filling them (src/ring/membership.ts).
      a.legacy_pool
        ? a.serves.length > 0
          ? `${a.serves.join(",")} +ring`
          : "(legacy ring)"
        : a.serves.join(",") || "-",
      ago(a.last_seen, now),
    ]),
  );
  const held = snapshot.shards.filter((s) => s.lease !== null).length;
  const up = snapshot.agents.filter((a) => a.up).length;
  return (
    `${snapshot.at}  ${held} of ${snapshot.shards.length} shards held, ${up} of ${snapshot.agents.length} agents up ` +
    `(down after ${snapshot.down_after_ms / 1000} s silent)\n${ironicLine(snapshot.ironic)}\n\n${shards}\n${agents}`
  );
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
      bridge: { type: "string", default: process.env.SHARDBRIDGE_URL ?? "http://127.0.0.1:6390" },
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
      watch: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  if (!values.token) throw new ConfigError("status: pass --token or set SHARDBRIDGE_TOKEN");
  if (positionals.length > 1 || (positionals.length === 1 && !values.watch))
    throw new ConfigError(`status: unexpected ${positionals.join(" ")}`);
  const everyS = values.watch ? (integerFlag("watch", positionals[0] ?? "2", 1, 3600) ?? 2) : 0;
  const client = new BridgeClient(values.bridge!, values.token);
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
