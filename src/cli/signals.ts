import { logger } from "../runtime/log.js";

/**
 * The signals that end a long-running command gracefully: SIGTERM (systemd, Kubernetes),
 * SIGINT (Ctrl-C) and SIGHUP (a closed terminal or ssh session; none of these commands
 * reloads its files: restart it). Without a handler, node dies of SIGHUP at once with
 * status 129 and no word, which for `run` left the child's lease held until it expired.
 */
export const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/**
 * Call `stop` on the first of STOP_SIGNALS, once, logging which signal came; a later one
 * is logged and changes nothing (the stop under way finishes).
 */
export function onStopSignal(command: string, stop: (signal: NodeJS.Signals) => void): void {
  let first: NodeJS.Signals | null = null;
  for (const signal of STOP_SIGNALS)
    process.on(signal, () => {
      if (first !== null) {
        logger.info("signal-ignored", { command, signal, stopping_since: first });
        return;
      }
      first = signal;
      logger.info("stopping", { command, signal });
      stop(signal);
    });
}
