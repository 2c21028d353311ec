import { parseArgs } from "node:util";
import { z } from "zod";
import { AgentId } from "../core/names.js";
import { MemberList, RingKindName } from "../core/ring/kinds.js";
import { compareEvents, type Comparison, type ModeOutcome } from "../core/ring/compare.js";
import { INVENTORY_OPTIONS, INVENTORY_USAGE, loadInventory } from "./inventory.js";
import { integerFlag, flagsOrThrow } from "./io.js";
import { renderTable } from "../runtime/text/table.js";
import { ConfigError } from "../runtime/config.js";

export const COMPARE_USAGE = `  compare  what each agent lost, back or added does to the nodes: nova's ring against shards with leases
             --agents a,b,c  the compute agents (nova's ring members)
${INVENTORY_USAGE}             --ring KIND     tooz (nova's, default) or ketama
             --standbys N    passive agents per shard (default 1)
             --add NAME      the agent the "added" event adds (default new-agent)
             --agent X       only the events of agent X (repeatable)
             --nodes         list the nodes each event moves
             --json          the whole comparison, every move included, as JSON
`;

const cell = (o: ModeOutcome) => [o.moved, o.agentsGaining, o.unmanaged];

function table(comparison: Comparison, listNodes: boolean): string {
  const { nodes, agents, ringKind, shards, standbys, events } = comparison;
  const head =
    `compare: ${nodes} nodes, ${agents.length} agents; ring: ${ringKind}; shards: ${shards}, ` +
    `${standbys} standby each (unsharded nodes as \`migrate plan\` would shard them)\n\n`;
  const rows = events.map((e) => [`${e.event} ${e.agent}`, ...cell(e.ring), "|", ...cell(e.shards)]);
  const lost = events.filter((e) => e.event === "lost");
  if (lost.length > 1) {
    const mean = (pick: (e: (typeof lost)[number]) => number) =>
      (lost.reduce((sum, e) => sum + pick(e), 0) / lost.length).toFixed(1);
    rows.push([
      "mean per agent lost",
      mean((e) => e.ring.moved),
      mean((e) => e.ring.agentsGaining),
      mean((e) => e.ring.unmanaged),
      "|",
      mean((e) => e.shards.moved),
      mean((e) => e.shards.agentsGaining),
      mean((e) => e.shards.unmanaged),
    ]);
  }
  let out =
    head +
    renderTable(
      ["event", "ring: moved", "to agents", "unmanaged", "|", "shards: moved", "to agents", "unmanaged"],
      rows,
    );
  out +=
    "\nring: a lost agent's nodes move when nova counts it down (service_down_time 60 s) and rebuilds (up to 60 s more);" +
    "\n      they move back when it returns. A deployed node stays with its instance's host: unmanaged while it is down." +
    "\nshards: a lost active's shards move whole to their standby within one lease TTL; an agent back or added is a standby.\n";
  if (listNodes) {
    for (const e of events) {
      for (const [mode, o] of [
        ["ring", e.ring],
        ["shards", e.shards],
      ] as const) {
        for (const m of o.moves)
          out += `${e.event} ${e.agent}\t${mode}\t${m.uuid}\t${m.from} -> ${m.to ?? "(nobody)"}\n`;
      }
    }
  }
  return out;
}

export async function compareCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...INVENTORY_OPTIONS,
      agents: { type: "string" },
      ring: { type: "string", default: "tooz" },
      standbys: { type: "string", default: "1" },
      add: { type: "string", default: "new-agent" },
      agent: { type: "string", multiple: true },
      nodes: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  const flags = flagsOrThrow(
    z.strictObject({
      agents: MemberList,
      ring: RingKindName,
      add: AgentId,
    }),
    { agents: values.agents ?? "", ring: values.ring, add: values.add },
  );
  const agents = flags.agents.map((a) => a.toLowerCase());
  if (agents.includes(flags.add.toLowerCase()))
    throw new ConfigError(`--add: ${flags.add} is already one of --agents; name an agent to add`);
  const only = values.agent?.map((a) => a.toLowerCase());
  for (const a of only ?? [])
    if (!agents.includes(a))
      throw new ConfigError(`--agent: ${a} is not one of --agents (${agents.join(",")})`);
  const standbys = integerFlag("standbys", values.standbys, 0, 16)!;
  const inventory = await loadInventory(values);
  const comparison = compareEvents(inventory.nodes, agents, {
    kind: flags.ring,
    standbys,
    added: flags.add,
    ...(only !== undefined && { only }),
  });
  process.stdout.write(values.json ? `${JSON.stringify(comparison)}\n` : table(comparison, values.nodes));
}
