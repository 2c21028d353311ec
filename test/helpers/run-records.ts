import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { AgentProcess } from "./agent-process.js";
import type { BridgeProcess } from "./bridge-process.js";
import { watchOverlaps } from "./processes.js";

/** The child `shardbridge run` guards in the tests: it records its own life (see the script). */
export const RUN_CHILD = fileURLToPath(new URL("../fixtures/run-child.sh", import.meta.url));

/** One child of the fixture, by its own records. */
export interface ChildLife {
  pid: number;
  token: number;
  startNs: bigint;
  lastWriteNs: bigint;
}

/** A record's time: nanoseconds since the epoch, 19 digits until 2286. */
const NS = /^\d{19}$/;

/**
 * The children's own records: who started under which token, and their last write.
 * Whole lines only: a child may be writing one as the file is read, and a line cut short
 * ("start PID TOKEN 17963") once sorted a child started "in 1970" first and printed a
 * handover of 1,796,360,824,730 ms.
 */
export function lives(records: string): ChildLife[] {
  const byPid = new Map<number, ChildLife>();
  const text = readFileSync(records, "utf8");
  for (const line of text.slice(0, text.lastIndexOf("\n") + 1).split("\n")) {
    const [kind, pid, token, ns] = line.split(" ");
    if (ns === undefined || !NS.test(ns)) continue;
    if (kind === "start")
      byPid.set(Number(pid), {
        pid: Number(pid),
        token: Number(token),
        startNs: BigInt(ns),
        lastWriteNs: BigInt(ns),
      });
    const life = byPid.get(Number(pid));
    if (kind === "write" && life !== undefined) life.lastWriteNs = BigInt(ns);
  }
  return [...byPid.values()].sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
}

/** `shardbridge run` for `host` on `bridge` and `shard`, guarding the fixture child that records its life in `records`. */
export function runFixture(
  host: string,
  shard: string,
  bridge: BridgeProcess,
  records: string,
  extra: Record<string, string> = {},
): AgentProcess {
  return AgentProcess.cli(
    host,
    [
      ...["run", "--id", host, "--shard", shard, "--bridge", bridge.url],
      // The fixture child calls no Ironic, and the bridge fronts none.
      ...["--tokens-file", bridge.tokensFile, "--unfenced", "--", RUN_CHILD],
    ],
    { RUN_RECORDS: records, ...extra },
  );
}

/** The children the records name, watched every 10 ms: never two running at once. */
export const watchChildren = (records: string) =>
  watchOverlaps(() => lives(records).map((l) => ({ pid: l.pid, label: String(l.token) })));
