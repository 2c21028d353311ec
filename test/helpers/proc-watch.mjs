/**
 * A watch on the kernel's process table, run as a process of its own so that its polling
 * never waits behind the test's event loop (nor holds it). Every 10 ms it lists /proc and
 * keeps the processes whose program is COMMAND (or the script an interpreter runs: its path
 * ends in /COMMAND) and whose environment holds every
 * NAME=VALUE of ENV (argv[2], a JSON object {command, env}), and their state (the kernel's
 * letter: R, S, D, T stopped, ...; zombies are left out: they run nothing). Each time that
 * set or a state changes it prints one JSON line: {"at": ms of the epoch, "procs":
 * [{"pid", "ppid", "state"}]}. A process is matched by its cmdline and environ; one that does not
 * match is looked at again until it is 2 s old (a supervisor's child execs nova-compute
 * right after its fork, with the same pid), then left alone.
 */
import { readdirSync, readFileSync } from "node:fs";

const { command, env } = JSON.parse(process.argv[2]);
const wanted = Object.entries(env).map(([k, v]) => `${k}=${v}`);
/** pid -> whether it is one of ours, once decided */
const decided = new Map();
/** the kernel's clock ticks a second in /proc (USER_HZ: 100 on Linux's ABI) */
const TICKS = 100;
const SETTLED_S = 2;

const read = (path) => {
  try {
    return readFileSync(path, "latin1");
  } catch {
    return null;
  }
};

function ours(pid) {
  const cmdline = read(`/proc/${pid}/cmdline`);
  if (cmdline === null) return false;
  // The program, or the script an interpreter runs (python3 /venv/bin/nova-compute): not a
  // supervisor whose arguments name it.
  const [program, script] = cmdline.split("\0");
  if (![program, script].some((a) => a === command || a?.endsWith(`/${command}`))) return false;
  const environ = read(`/proc/${pid}/environ`);
  if (environ === null) return false;
  const vars = new Set(environ.split("\0"));
  return wanted.every((w) => vars.has(w));
}

let last = "";
function look() {
  const uptime = Number(read("/proc/uptime")?.split(" ")[0]);
  const procs = [];
  const present = new Set();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    present.add(pid);
    if (decided.get(pid) === false) continue;
    const stat = read(`/proc/${pid}/stat`);
    if (stat === null) continue;
    // After the command's closing parenthesis: state (field 3), ppid (4) ... starttime (22).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (!decided.has(pid)) {
      const match = ours(pid);
      if (match || uptime - Number(fields[19]) / TICKS > SETTLED_S) decided.set(pid, match);
      if (!match) continue;
    }
    const [state, ppid] = fields;
    if (state !== "Z" && state !== "X") procs.push({ pid, ppid: Number(ppid), state });
  }
  for (const pid of decided.keys()) if (!present.has(pid)) decided.delete(pid);
  const said = JSON.stringify(procs);
  if (said !== last) {
    last = said;
    process.stdout.write(`${JSON.stringify({ at: Date.now(), procs })}\n`);
  }
}

look();
setInterval(look, 10);
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
