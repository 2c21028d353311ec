import winston from "winston";

/** The levels a logger takes, most severe first (winston's npm levels). */
export const LOG_LEVELS = ["error", "warn", "info", "http", "verbose", "debug", "silly"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ["json", "text"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * What no log line may carry, whoever wrote it: a password in a URL (`redis://:pw@`,
 * `http://user:pw@ironic`), and a lease's fence key in a fenced endpoint's path (a key
 * is the lease's whole authority at Ironic while the lease lives).
 */
const SECRETS: ReadonlyArray<readonly [RegExp, string]> = [
  [/([a-z][a-z0-9+.-]*:\/\/[^/\s:@]*):[^/\s@]*@/gi, "$1:***@"],
  [/(\/lease-[0-9]+-)[0-9a-f]{32}\b/g, "$1***"],
];

/** `text` with every secret SECRETS names masked. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, mask] of SECRETS) out = out.replace(pattern, mask);
  return out;
}

/** A value with every string in it redacted (objects and arrays walked; a cycle is left as it is). */
function redactValue(value: unknown, seen: Set<object>): unknown {
  if (typeof value === "string") return redactSecrets(value);
  if (typeof value !== "object" || value === null || seen.has(value)) return value;
  seen.add(value);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, seen));
  if (value instanceof Error) return redactSecrets(String(value));
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, redactValue(item, seen)]));
}

/** Applied to every line before it is formatted. */
const redacted = winston.format((info) => {
  const seen = new Set<object>();
  for (const key of Object.keys(info)) info[key] = redactValue(info[key], seen);
  info.message = redactValue(info.message, seen);
  return info;
});

/** One JSON object a line: for journald, log shippers, and the tests that read agents' logs. */
const json = winston.format.combine(redacted(), winston.format.timestamp(), winston.format.json());

/** A value as it reads after `key=`: bare when it has no space or quote, JSON otherwise. */
function fieldText(value: unknown): string {
  return typeof value === "string" && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
}

/** "2026-12-01T16:47:05.380Z info  active agent=compute-1 shard=rack-a token=42": for a person at a terminal. */
const text = winston.format.combine(
  redacted(),
  winston.format.timestamp(),
  winston.format.printf((info) => {
    const { timestamp, level, message, ...fields } = info;
    const rest = Object.entries(fields)
      .map(([key, value]) => `${key}=${fieldText(value)}`)
      .join(" ");
    return `${String(timestamp)} ${level.padEnd(5)} ${String(message)}${rest === "" ? "" : ` ${rest}`}`;
  }),
);

/**
 * The process's logger. Level from SHARDBRIDGE_LOG_LEVEL (default info); format from
 * SHARDBRIDGE_LOG_FORMAT, by default text on a terminal and JSON otherwise (a service
 * under systemd, a pipe); both can be set per command (`--log-level`, `--log-format`).
 * Lines written while serving a request carry its `request_id`, passed explicitly: an
 * AsyncLocalStorage would carry it by itself, but its promise hooks cost about a fifth
 * of the CPU of every lease renew (measured), for a few error lines.
 */
export const logger = winston.createLogger({
  level: process.env.SHARDBRIDGE_LOG_LEVEL ?? "info",
  format: formatOf((process.env.SHARDBRIDGE_LOG_FORMAT as LogFormat | undefined) ?? defaultFormat()),
  transports: [new winston.transports.Console()],
});

function defaultFormat(): LogFormat {
  return process.stdout.isTTY === true ? "text" : "json";
}

function formatOf(format: LogFormat): winston.Logform.Format {
  return format === "text" ? text : json;
}

/**
 * Whether lines at `level` are written now. Winston's own isLevelEnabled builds its list
 * of transports at every call, which every request paid in garbage for a line it did not
 * write (2% of what the bridge allocates under a fleet's renews); this logger's one
 * transport takes every level the logger does.
 */
export function levelEnabled(level: LogLevel): boolean {
  return LOG_LEVELS.indexOf(level) <= LOG_LEVELS.indexOf(logger.level as LogLevel);
}

/** Set the level and the format (children made before follow: they share the logger's). */
export function configureLogging(options: { level?: LogLevel; format?: LogFormat }): void {
  if (options.level !== undefined) logger.level = options.level;
  if (options.format !== undefined) logger.format = formatOf(options.format);
}
