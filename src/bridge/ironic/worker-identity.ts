import { createHash, randomBytes } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/**
 * This bridge's name among the Ironic delivery workers (the holder of its partition
 * leases). A bridge restarted on the same address gets the same name, so it takes its own
 * partitions back at once: the lease rules give a holder's own id a new lease, with a new
 * token, over one it renewed. That is safe only if no other live process has the name, so
 * the name is that of something only one live process can hold: the listening address
 * (bind, port) in one network namespace of one boot of one machine. The caller starts
 * delivery only once it listens there; two bridges cannot both have bound it, and one
 * that died (kill -9 too) let it go. A frozen one (SIGSTOP) keeps it, so its successor
 * cannot start, and another bridge takes the partitions once their leases expire.
 *
 * Without a fixed port, or where the namespace and boot cannot be read (not Linux), the
 * name is the process's own (host:pid:random): nothing to take back after a restart.
 */
export function workerIdentity(bind: string, port: number): string {
  const own = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  if (port === 0) return own;
  let scope: string;
  try {
    scope = `${readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}/${readlinkSync("/proc/self/ns/net")}`;
  } catch {
    return own;
  }
  const where = createHash("sha256").update(`${scope}/${bind}`).digest("hex").slice(0, 12);
  return `${hostname()}:${port}@${where}`;
}
