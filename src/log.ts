import { AsyncLocalStorage } from "node:async_hooks";
import winston from "winston";

/** The request a log line belongs to, carried across awaits. */
export const requestContext = new AsyncLocalStorage<{ requestId: string }>();

/** Stamp every line logged while serving a request with that request's id. */
const withRequestId = winston.format((info) => {
  const context = requestContext.getStore();
  if (context !== undefined && info.request_id === undefined) info.request_id = context.requestId;
  return info;
});

/** JSON logs, one line per event. Level from SHARDBRIDGE_LOG_LEVEL (default info). */
export const logger = winston.createLogger({
  level: process.env.SHARDBRIDGE_LOG_LEVEL ?? "info",
  format: winston.format.combine(withRequestId(), winston.format.timestamp(), winston.format.json()),
  transports: [new winston.transports.Console()],
});
