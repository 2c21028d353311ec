#!/usr/bin/env node
// The shardbridge command: its usage and a table of subcommands, each in src/commands/.
import { AGENT_USAGE, agentCommand } from "./commands/agent.js";
import { CHAOS_USAGE, chaosCommand } from "./commands/chaos.js";
import { COMPARE_USAGE, compareCommand } from "./commands/compare.js";
import { INSPECTION_WATCH_USAGE, inspectionWatchCommand } from "./commands/inspection-watch.js";
import { IRONIC_SYNC_USAGE, ironicSyncCommand } from "./commands/ironic-sync.js";
import { MIGRATE_USAGE, migrateCommand } from "./commands/migrate.js";
import { RING_USAGE, ringCommand } from "./commands/ring.js";
import { RUN_USAGE, runCommand } from "./commands/run.js";
import { SERVE_USAGE, serveCommand } from "./commands/serve.js";
import { SIMULATE_USAGE, simulateCommand } from "./commands/simulate.js";

const USAGE = `usage: shardbridge <command> [options]

commands:
${SERVE_USAGE}${IRONIC_SYNC_USAGE}${INSPECTION_WATCH_USAGE}${RING_USAGE}${COMPARE_USAGE}${MIGRATE_USAGE}${SIMULATE_USAGE}${CHAOS_USAGE}${RUN_USAGE}${AGENT_USAGE}`;

const COMMANDS: Record<string, (argv: string[]) => Promise<void>> = {
  serve: serveCommand,
  agent: agentCommand,
  run: runCommand,
  "ironic-sync": ironicSyncCommand,
  "inspection-watch": inspectionWatchCommand,
  ring: ringCommand,
  compare: compareCommand,
  migrate: migrateCommand,
  simulate: simulateCommand,
  chaos: chaosCommand,
};

async function main([command, ...rest]: string[]): Promise<void> {
  if (command === undefined || ["help", "--help", "-h"].includes(command)) {
    process.stdout.write(USAGE);
    return;
  }
  const run = COMMANDS[command];
  if (run === undefined) {
    process.stderr.write(`unknown command: ${command}\n${USAGE}`);
    process.exit(2);
  }
  await run(rest);
}

// Output piped into `head` and the like: a closed pipe ends the command quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`shardbridge: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
