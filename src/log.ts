import winston from "winston";

/**
 * JSON logs, one line per event. Level from SHARDBRIDGE_LOG_LEVEL (default info). Lines
 * written while serving a request carry its `request_id`, passed explicitly: an
 * AsyncLocalStorage would carry it by itself, but its promise hooks cost about a fifth
 * of the CPU of every lease renew (measured), for a few error lines.
 */
export const logger = winston.createLogger({
  level: process.env.SHARDBRIDGE_LOG_LEVEL ?? "info",
  format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
  transports: [new winston.transports.Console()],
});
