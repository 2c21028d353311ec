#!/usr/bin/env node
// The shardbridge command: a table of subcommands (each in src/cli/, each with its
// usage), the options every command takes, and the exit status of every run.
import { parseArgs } from "node:util";
import { AGENT_USAGE, agentCommand } from "./cli/agent.js";
import { CHAOS_USAGE, chaosCommand } from "./cli/chaos.js";
import { COMPARE_USAGE, compareCommand } from "./cli/compare.js";
import { INSPECTION_WATCH_USAGE, inspectionWatchCommand } from "./cli/inspection-watch.js";
import { IRONIC_SYNC_USAGE, ironicSyncCommand } from "./cli/ironic-sync.js";
import { MIGRATE_USAGE, migrateCommand } from "./cli/migrate.js";
import { RING_USAGE, ringCommand } from "./cli/ring.js";
import { RUN_USAGE, runCommand } from "./cli/run.js";
import { SERVE_USAGE, serveCommand } from "./cli/serve.js";
import { SIMULATE_USAGE, simulateCommand } from "./cli/simulate.js";
import { STATUS_USAGE, statusCommand } from "./cli/status.js";
import { BridgeError } from "./agent/bridge-client.js";
import { ConfigError } from "./runtime/config.js";
import { configureLogging, LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "./runtime/log.js";
import { ShardDefinitionError } from "./bridge/shards/catalog.js";
import { StoreSpecError } from "./store/open.js";
import { versionLine } from "./runtime/version.js";

interface Command {
  /** its lines in the usage: the one text `--help` and the top-level list both print */
  usage: string;
  /** what follows its options on the command line, if anything */
  operands?: string;
  run: (argv: string[]) => Promise<void>;
}

/** In the order the usage lists them. */
const COMMANDS: Record<string, Command> = {
  serve: { usage: SERVE_USAGE, run: serveCommand },
  status: { usage: STATUS_USAGE, run: statusCommand },
  "ironic-sync": { usage: IRONIC_SYNC_USAGE, run: ironicSyncCommand },
  "inspection-watch": { usage: INSPECTION_WATCH_USAGE, run: inspectionWatchCommand },
  ring: { usage: RING_USAGE, run: ringCommand },
  compare: { usage: COMPARE_USAGE, run: compareCommand },
  migrate: { usage: MIGRATE_USAGE, run: migrateCommand },
  simulate: { usage: SIMULATE_USAGE, run: simulateCommand },
  chaos: { usage: CHAOS_USAGE, run: chaosCommand },
  run: { usage: RUN_USAGE, run: runCommand, operands: "-- COMMAND [ARGS...]" },
  agent: { usage: AGENT_USAGE, run: agentCommand },
  help: {
    usage: `  help [COMMAND]  the list of commands, or COMMAND's usage (as COMMAND --help)\n`,
    operands: "[COMMAND]",
    run: helpCommand,
  },
  version: {
    usage: `  version  this build's version and commit (as --version)\n`,
    run: versionCommand,
  },
};

const COMMON = `
options of every command:
  --log-level LEVEL   ${LOG_LEVELS.join(", ")} (env SHARDBRIDGE_LOG_LEVEL, default info)
  --log-format FORMAT json or text (env SHARDBRIDGE_LOG_FORMAT; default text on a terminal, JSON otherwise)
  --help              this command's usage

exit status: 0 done, 1 failed, 2 bad usage or configuration
`;

const USAGE = `usage: shardbridge <command> [options]
       shardbridge <command> --help | shardbridge help <command> | shardbridge --version

commands:
${Object.values(COMMANDS)
  .map((c) => c.usage)
  .join("")}${COMMON}`;

const commandUsage = (name: string) => {
  const { usage, operands } = COMMANDS[name]!;
  return `usage: shardbridge ${name} [options]${operands === undefined ? "" : ` ${operands}`}\n\n${usage}${COMMON}`;
};

/** `shardbridge help [COMMAND]`: the top-level usage, or one command's. */
async function helpCommand(argv: string[]): Promise<void> {
  const { positionals } = parseArgs({ args: argv, allowPositionals: true, options: {} });
  if (positionals.length > 1)
    throw new ConfigError(`help: one command at a time, got ${positionals.join(" ")}`);
  const about = positionals[0];
  if (about === undefined) return void process.stdout.write(USAGE);
  if (COMMANDS[about] === undefined)
    throw new ConfigError(`help: no command ${about} (shardbridge --help lists them)`);
  process.stdout.write(commandUsage(about));
}

/** `shardbridge version`: the version line, as --version prints it. */
async function versionCommand(argv: string[]): Promise<void> {
  parseArgs({ args: argv, options: {} });
  process.stdout.write(`${versionLine()}\n`);
}

/**
 * node:util parseArgs's refusals, in the words of the CLI's own: node's quote the option
 * unevenly (`as in '-- "--x"`) and span lines. Its wording for each code (Node 20) is matched;
 * anything else is passed on as node says it.
 */
function parseArgsMessage(code: string, message: string): string {
  const option = /^Option '(?:-\w, )?(--[^' ]+)/.exec(message)?.[1];
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const unknown = /^Unknown option '([^']+)'/.exec(message)?.[1];
    if (unknown !== undefined) return `unknown option ${unknown}`;
  }
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
    const stray = /^Unexpected argument '(.*)'\. This command does not take positional arguments$/s.exec(
      message,
    )?.[1];
    if (stray !== undefined) return `unexpected argument ${stray}: this command takes options only`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && option !== undefined) {
    if (message.endsWith("argument missing")) return `${option}: needs a value`;
    if (message.endsWith("does not take an argument")) return `${option}: takes no value`;
    // The value itself is not repeated: it may be a token.
    if (message.includes("argument is ambiguous"))
      return `${option}: its value begins with -; if that is meant, write ${option}=VALUE`;
  }
  return message.split("\n")[0]!;
}

/** Bad usage or configuration: the operator's to fix, exit 2 (see COMMON). */
function isUsageError(error: unknown): boolean {
  if (
    error instanceof ConfigError ||
    error instanceof ShardDefinitionError ||
    error instanceof StoreSpecError
  )
    return true;
  // A token the bridge does not know (401) or that may not do this (403) is configuration.
  if (error instanceof BridgeError && (error.status === 401 || error.status === 403)) return true;
  // node:util parseArgs: an unknown option, a missing value, a stray positional.
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_");
}

/**
 * `--log-level` and `--log-format`, wherever they stand among a command's own options
 * (not after `--`: that belongs to the command `run` starts), taken out and checked.
 */
function takeLoggingFlags(argv: string[]): { rest: string[]; level?: LogLevel; format?: LogFormat } {
  const rest: string[] = [];
  const found: { level?: LogLevel; format?: LogFormat } = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    const [flag, inline] = arg.startsWith("--log-") ? arg.split(/=(.*)/s, 2) : [arg, undefined];
    if (flag !== "--log-level" && flag !== "--log-format") {
      rest.push(arg);
      continue;
    }
    const value = inline ?? argv[++i];
    if (flag === "--log-level") {
      if (!LOG_LEVELS.includes(value as LogLevel))
        throw new ConfigError(
          `--log-level: must be one of ${LOG_LEVELS.join(", ")}, got ${value ?? "nothing"}`,
        );
      found.level = value as LogLevel;
    } else {
      if (!LOG_FORMATS.includes(value as LogFormat))
        throw new ConfigError(`--log-format: must be json or text, got ${value ?? "nothing"}`);
      found.format = value as LogFormat;
    }
  }
  return { rest, ...found };
}

const wantsHelp = (argv: string[]) => {
  const own = argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv;
  return own.includes("--help") || own.includes("-h");
};

async function main([name, ...argv]: string[]): Promise<void> {
  // No command is bad usage, as a command without what it needs is: the list, on stderr, exit 2.
  if (name === undefined) {
    process.stderr.write(USAGE);
    throw new ConfigError("give a command (the list above)");
  }
  if (name === "--help" || name === "-h") return void process.stdout.write(USAGE);
  const named = name === "--version" ? "version" : name;
  const command = COMMANDS[named];
  if (command === undefined)
    throw new ConfigError(`unknown command: ${name} (shardbridge --help lists them)`);
  if (wantsHelp(argv)) return void process.stdout.write(commandUsage(named));
  const { rest, level, format } = takeLoggingFlags(argv);
  configureLogging({ ...(level !== undefined && { level }), ...(format !== undefined && { format }) });
  await command.run(rest);
}

// Output piped into `head` and the like: a closed pipe ends the command quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

const [invoked] = process.argv.slice(2);
/**
 * What went wrong, in one line. fetch says only "fetch failed" when it reached nobody; the
 * why (a refused connection, an unknown host, a timeout) and the address are in its cause.
 */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_"))
    return parseArgsMessage(code, error.message);
  const cause = error.cause instanceof Error ? error.cause.message : undefined;
  if (error instanceof TypeError && error.message === "fetch failed" && cause !== undefined)
    return `cannot reach the server: ${cause}`;
  return error.message;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`shardbridge: ${describe(error)}\n`);
  if (!isUsageError(error)) process.exit(1);
  const help = invoked !== undefined && COMMANDS[invoked] !== undefined ? `${invoked} --help` : "--help";
  process.stderr.write(`(see shardbridge ${help})\n`);
  process.exit(2);
});
