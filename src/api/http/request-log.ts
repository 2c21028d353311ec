import { randomUUID } from "node:crypto";
import { levelEnabled, logger } from "../../runtime/log.js";

/** A request slower than this is logged at warn: something held the bridge or its store. */
const SLOW_REQUEST_MS = 500;

/**
 * One line per request at debug (the metrics count every request; formatting a log line
 * for each renew would cost more than the renew), and at warn when it was slow.
 */
export function logRequest(
  req: { method?: string | undefined; url?: string | undefined },
  status: number,
  requestId: string,
  ms: number,
): void {
  const level = ms >= SLOW_REQUEST_MS ? "warn" : "debug";
  if (!levelEnabled(level)) return;
  logger.log(level, ms >= SLOW_REQUEST_MS ? "slow request" : "request", {
    request_id: requestId,
    method: req.method,
    path: (req.url ?? "").split("?")[0],
    status,
    ms: Math.round(ms * 10) / 10,
  });
}

/**
 * The caller's X-Request-Id when it is a sane one (it lands in every log line and is
 * echoed back), else a fresh one.
 */
export function requestIdOf(presented: string | undefined): string {
  return presented !== undefined && /^[\x21-\x7e]{1,128}$/.test(presented) ? presented : randomUUID();
}
