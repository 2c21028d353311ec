import { existsSync, readFileSync } from "node:fs";

/** One line of nova's log (oslo.log's default format: time, pid, level, logger, context, message). */
export interface NovaLogLine {
  /** ms of the epoch (the log's local time, as this machine reads it) */
  at: number;
  pid: number;
  level: string;
  logger: string;
  message: string;
}

const LINE = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3}) (\d+) (\w+) (\S+) (?:\[[^\]]*\] )?(.*)$/;

export function readNovaLog(path: string): NovaLogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .flatMap((text) => {
      const m = LINE.exec(text);
      if (m === null) return [];
      const [y, mo, d, h, mi, s, ms] = m.slice(1, 8).map(Number) as [
        number,
        number,
        number,
        number,
        number,
        number,
        number,
      ];
      return [
        {
          at: new Date(y, mo - 1, d, h, mi, s, ms).getTime(),
          pid: Number(m[8]),
          level: m[9]!,
          logger: m[10]!,
          message: m[11]!,
        },
      ];
    });
}

/**
 * When process `pid` had reported every node of `nodes` (its resource tracker's "Final
 * resource view" for each, logged as it finishes a node's update), at or after `since`:
 * the time of the last of them, or null while one is missing.
 */
export function reportedAllAt(
  lines: NovaLogLine[],
  pid: number,
  nodes: string[],
  since: number,
): number | null {
  const first = new Map<string, number>();
  for (const line of lines) {
    if (line.pid !== pid || line.at < since) continue;
    const m = /Final resource view: name=(\S+)/.exec(line.message);
    if (m !== null && !first.has(m[1]!)) first.set(m[1]!, line.at);
  }
  if (!nodes.every((n) => first.has(n))) return null;
  return Math.max(...nodes.map((n) => first.get(n)!));
}

/**
 * The HTTP requests process `pid` logged sending (keystoneauth's `REQ: curl ... -X METHOD
 * URL`), at or after `since`; with the SHA-256 of the X-Auth-Token it sent (keystoneauth
 * logs `{SHA256}<hex>` in its place), or null when it sent none.
 */
export function requestsSent(
  lines: NovaLogLine[],
  pid: number,
  since: number,
): Array<{ at: number; method: string; url: string; tokenSha256: string | null }> {
  return lines.flatMap((line) => {
    if (line.pid !== pid || line.at < since) return [];
    const m = /REQ: curl -g -i (?:--insecure )?-X (\w+) "?([^"\s]+)/.exec(line.message);
    if (m === null) return [];
    const token = /-H "X-Auth-Token: \{SHA256\}([0-9a-f]{64})"/.exec(line.message);
    return [{ at: line.at, method: m[1]!, url: m[2]!, tokenSha256: token?.[1] ?? null }];
  });
}

/** Each "Hash ring members are {...}" line of nova-compute `pid` (its ring, rebuilt at each resource update). */
export const ringsOf = (log: NovaLogLine[], pid: number) =>
  log.flatMap((l) =>
    l.pid === pid && l.message.startsWith("Hash ring members are ")
      ? [{ at: l.at, members: [...l.message.matchAll(/'([^']+)'/g)].map((m) => m[1]!).sort() }]
      : [],
  );

/** Each report of a node in nova's log ("Final resource view: name=UUID"), with the process that made it. */
export const reportsIn = (log: NovaLogLine[], since: number) =>
  log.flatMap((l) => {
    const m = /^Final resource view: name=(\S+)/.exec(l.message);
    return m !== null && l.at >= since ? [{ at: l.at, pid: l.pid, uuid: m[1]! }] : [];
  });

/**
 * nova-compute `pid`'s first periodic resource update that began at or after `since` (oslo's
 * "Running periodic task ComputeManager.update_available_resource", DEBUG) and has since
 * written `node` (the resource tracker's "Compute_service record updated for HOST:NODE",
 * logged once the node's provider is sent to placement): when the pass began and when it
 * wrote the node. Null until then. The pass reads its nodes from Ironic as it begins, so
 * what Ironic held at `since`, the provider holds once the node is written.
 */
export function nextUpdateOf(
  log: NovaLogLine[],
  pid: number,
  node: string,
  since: number,
): { startedAt: number; writtenAt: number } | null {
  const own = log.filter((l) => l.pid === pid && l.at >= since);
  const start = own.findIndex((l) =>
    l.message.startsWith("Running periodic task ComputeManager.update_available_resource"),
  );
  if (start < 0) return null;
  const writes = new RegExp(`^Compute_service record updated for \\S+:${node}\\b`);
  const written = own.slice(start + 1).find((l) => writes.test(l.message));
  return written === undefined ? null : { startedAt: own[start]!.at, writtenAt: written.at };
}

/** Each "ComputeNode UUID moving from OLD to NEW" in nova's log (a nova-compute taking a node's record), at or after `since`. */
export const takenIn = (log: NovaLogLine[], since: number) =>
  log.flatMap((l) => {
    const m = /^ComputeNode (\S+) moving from (\S+) to (\S+)$/.exec(l.message);
    return m !== null && l.at >= since ? [{ at: l.at, uuid: m[1]!, from: m[2]!, to: m[3]! }] : [];
  });

/**
 * Whether nova-compute `pid` has been through a resource update with nothing to manage
 * (its shard empty yet): the driver's "Returning 0 available node(s)".
 */
export const updatedEmpty = (log: NovaLogLine[], pid: number): boolean =>
  log.some((l) => l.pid === pid && l.message.startsWith("Returning 0 available node(s)"));

/** Where oslo.log's DEBUG lines say they were logged: " function /path/to/module.py:123" at the end. */
const CODE_LOCATION = /\s+\S+ \/\S+\.py:\d+$/;

/**
 * What nova said, for whoever reads a failure or a test's printout: the lines `keep` picks,
 * in order, each as "LEVEL message" on one line of at most `width` characters (a DEBUG
 * line without its code location).
 */
export const novaSaid = (log: NovaLogLine[], keep: (l: NovaLogLine) => boolean, width = 200): string[] =>
  log
    .filter(keep)
    .map((l) => `${l.level} ${l.message.replace(CODE_LOCATION, "").replace(/\s+/g, " ").slice(0, width)}`);
