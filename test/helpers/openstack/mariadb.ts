import { spawnSync } from "node:child_process";

/** The machine's MariaDB (a local service here: root, no password, on loopback). */
const CLIENT = ["--protocol=tcp", "--host=127.0.0.1", "--user=root", "--batch", "--skip-column-names"];

/** Run SQL in the machine's MariaDB; its output, tab-separated rows. */
export function mariadb(sql: string, database?: string): string {
  const run = spawnSync("mariadb", [...CLIENT, ...(database === undefined ? [] : [database]), "-e", sql], {
    encoding: "utf8",
    timeout: 60_000,
  });
  if (run.error !== undefined) throw new Error(`mariadb client: ${run.error.message}`);
  if (run.status !== 0) throw new Error(`mariadb: ${run.stderr.trim()} (in: ${sql.slice(0, 200)})`);
  return run.stdout;
}

/** Rows of a query, each as its columns' text (NULL as null). */
export function mariadbRows(sql: string, database: string): Array<Array<string | null>> {
  return mariadb(sql, database)
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => line.split("\t").map((cell) => (cell === "NULL" ? null : cell)));
}

/**
 * Databases of this test run's own, named `<prefix>_<name>`: created empty, and dropped by
 * `drop` — only these, never one the run did not make.
 */
export class TestDatabases {
  private readonly made: string[] = [];

  constructor(private readonly prefix: string) {}

  /** Create `<prefix>_<name>`; its SQLAlchemy URL. */
  create(name: string): string {
    const database = `${this.prefix}_${name}`;
    mariadb(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
    this.made.push(database);
    return `mysql+pymysql://root@127.0.0.1/${database}?charset=utf8mb4`;
  }

  /** The full name of database `name`. */
  name(name: string): string {
    return `${this.prefix}_${name}`;
  }

  drop(): void {
    for (const database of this.made.splice(0)) mariadb(`DROP DATABASE IF EXISTS \`${database}\``);
  }
}
