import winston from "winston";

/** JSON logs, one line per event. Level from SHARDBRIDGE_LOG_LEVEL (default info). */
export const logger = winston.createLogger({
  level: process.env.SHARDBRIDGE_LOG_LEVEL ?? "info",
  format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
  transports: [new winston.transports.Console()],
});
