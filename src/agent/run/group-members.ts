import { readdirSync, readFileSync } from "node:fs";

/**
 * Whether any process of a process group still runs, as the kernel sees it. `kill -0` on
 * the group is not enough: it also finds zombies, and a process that outlives its parent
 * (what a child leaves behind in its group when it exits) is reaped by init, which may
 * take its time — measured here, 1.0-1.8 s after the KILL, and `run` held the lease all
 * that while. A zombie has ended: its memory, files and sockets are gone and it cannot
 * act, only wait to be reaped; its pid is not reused before that. So a group whose every
 * process is a zombie has ended too.
 *
 * The members found are kept: while one of them still runs, the group does, and nothing
 * else is read. Only when none of them runs is /proc read whole (~1.7 ms for 110
 * processes here), for a member that one of them started meanwhile.
 */
export class GroupMembers {
  private known: number[] = [];

  constructor(readonly pgid: number) {}

  /** Whether a process of the group runs now. */
  running(): boolean {
    if (!anyInGroup(this.pgid)) {
      this.known = [];
      return false;
    }
    if (this.known.some((pid) => runsInGroup(pid, this.pgid))) return true;
    this.known = membersOf(this.pgid).filter((pid) => runsInGroup(pid, this.pgid));
    return this.known.length > 0;
  }
}

/** kill -0 on the group: whether the kernel still has any process of it, zombies included. */
function anyInGroup(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** State and process group from a /proc stat line ("pid (comm) S ppid pgrp ..."); comm may hold ") ". */
function stateAndGroup(stat: string): { state: string; pgrp: number } {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0]!, pgrp: Number(fields[2]) };
}

const read = (path: string): string | null => {
  try {
    return readFileSync(path, "latin1");
  } catch {
    return null; // gone, or never was
  }
};

/** Z: exited, waiting to be reaped; X: being reaped. */
const ended = (state: string) => state === "Z" || state === "X";

/** The process group of `pid` now; null when it is gone. */
export function groupOf(pid: number): number | null {
  const stat = read(`/proc/${pid}/stat`);
  return stat === null ? null : stateAndGroup(stat).pgrp;
}

/**
 * Whether process `pid` is in group `pgid` and not ended. A thread group whose leader
 * exited while other threads run shows its leader as a zombie: then its threads decide.
 */
function runsInGroup(pid: number, pgid: number): boolean {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === null) return false;
  const { state, pgrp } = stateAndGroup(stat);
  if (pgrp !== pgid) return false;
  if (!ended(state)) return true;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tasks.some((tid) => {
    const task = read(`/proc/${pid}/task/${tid}/stat`);
    return task !== null && !ended(stateAndGroup(task).state);
  });
}

/** Every process /proc shows in group `pgid`, zombies included. */
function membersOf(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync("/proc")) {
    const code = name.charCodeAt(0);
    if (code < 48 || code > 57) continue; // not a process
    const stat = read(`/proc/${name}/stat`);
    if (stat !== null && stateAndGroup(stat).pgrp === pgid) members.push(Number(name));
  }
  return members;
}
