import type { BootingCloud } from "./cloud.js";

/** Between two looks at nova's cell database and placement's (each look is three queries). */
const POLL_MS = 200;

/**
 * What a look saw change since the one before:
 * - `moved`: a node's compute node record (the same row) on another host;
 * - `duplicated`: a node with more than one live compute node record;
 * - `deleted`: a node's record deleted (its `deleted` set) or gone;
 * - `created`: a live record for a node under a row id not seen before (a record made again);
 * - `provider-changed`: a node's resource provider written (its generation moved);
 * - `provider-recreated`: the provider deleted and made again (a new row id), or gone;
 * - `instance-moved`: a server's host or node changed in nova's instance record.
 */
export type RecordChangeKind =
  | "moved"
  | "duplicated"
  | "deleted"
  | "created"
  | "provider-changed"
  | "provider-recreated"
  | "instance-moved";

export interface RecordChange {
  /** ms of the epoch: the look that saw it */
  at: number;
  kind: RecordChangeKind;
  /** the node's or the server's uuid */
  subject: string;
  from: string;
  to: string;
}

/** Counts of each kind of change, every kind present. */
export type ChangeCounts = Record<RecordChangeKind, number>;

const KINDS: RecordChangeKind[] = [
  "moved",
  "duplicated",
  "deleted",
  "created",
  "provider-changed",
  "provider-recreated",
  "instance-moved",
];

/**
 * nova's and placement's records of some nodes and servers, looked at every POLL_MS from
 * their databases: each change one look saw from the one before, with when. A provider
 * deleted and made again between two looks still shows (a new row id); a record moved
 * there and back between two looks (under POLL_MS) would not, and nova's log says each
 * move of a record besides (`takenIn`).
 */
export class RecordWatch {
  looks = 0;
  /** looks that failed (a database not answering), with why */
  readonly failures: string[] = [];
  readonly changes: RecordChange[] = [];
  private readonly live = new Map<string, Map<number, string>>();
  private readonly seenIds = new Set<number>();
  private readonly provider = new Map<string, { id: number; generation: number }>();
  private readonly placed = new Map<string, string>();
  private first = true;
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly cloud: BootingCloud,
    private readonly nodes: readonly string[],
    private readonly servers: () => readonly string[],
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        this.look();
      } catch (error) {
        this.failures.push((error as Error).message);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  private note(at: number, kind: RecordChangeKind, subject: string, from: string, to: string): void {
    if (!this.first) this.changes.push({ at, kind, subject, from, to });
  }

  /** One look: nova's compute nodes, placement's providers, nova's instances. */
  private look(): void {
    const at = Date.now();
    const rows = this.cloud.novaComputeNodes();
    const providers = new Map(this.cloud.placementProviders().map((p) => [p.uuid, p]));
    const instances = this.cloud.novaInstances();
    this.looks++;
    for (const uuid of this.nodes) {
      const now = new Map(rows.filter((r) => r.uuid === uuid && !r.deleted).map((r) => [r.id, r.host]));
      const was = this.live.get(uuid) ?? new Map<number, string>();
      for (const [id, host] of was)
        if (!now.has(id)) this.note(at, "deleted", uuid, `record ${id} on ${host}`, "deleted");
      for (const [id, host] of now) {
        const before = was.get(id);
        if (before === undefined && this.seenIds.has(id))
          this.note(at, "created", uuid, "deleted", `record ${id} on ${host}`);
        else if (before === undefined) this.note(at, "created", uuid, "none", `record ${id} on ${host}`);
        else if (before !== host) this.note(at, "moved", uuid, before, host);
        this.seenIds.add(id);
      }
      if (now.size > 1 && was.size <= 1)
        this.note(
          at,
          "duplicated",
          uuid,
          `${was.size} record(s)`,
          [...now].map(([id, h]) => `${id} on ${h}`).join(", "),
        );
      this.live.set(uuid, now);

      const p = providers.get(uuid);
      const had = this.provider.get(uuid);
      if (had !== undefined && (p === undefined || p.id !== had.id))
        this.note(at, "provider-recreated", uuid, `row ${had.id}`, p === undefined ? "gone" : `row ${p.id}`);
      else if (had !== undefined && p !== undefined && p.generation !== had.generation)
        this.note(at, "provider-changed", uuid, `generation ${had.generation}`, `generation ${p.generation}`);
      if (p !== undefined) this.provider.set(uuid, { id: p.id, generation: p.generation });
      else this.provider.delete(uuid);
    }
    for (const uuid of this.servers()) {
      const row = instances.find((i) => i.uuid === uuid);
      if (row === undefined) continue;
      const where = row.deleted ? "deleted" : `${row.host}/${row.node}`;
      const was = this.placed.get(uuid);
      // A server booted after the watch began is not a move.
      if (was !== undefined && was !== where)
        this.changes.push({ at, kind: "instance-moved", subject: uuid, from: was, to: where });
      this.placed.set(uuid, where);
    }
    this.first = false;
  }

  /** Until at least one look has ended after now (so what is in the databases now was seen). */
  async caughtUp(): Promise<void> {
    const target = this.looks + 2;
    while (this.looks < target && !this.stopped) await new Promise((r) => setTimeout(r, POLL_MS / 2));
  }

  /** The changes seen in [from, to). */
  between(from: number, to: number): RecordChange[] {
    return this.changes.filter((c) => c.at >= from && c.at < to);
  }

  /** Each kind's count among `changes`. */
  static count(changes: readonly RecordChange[]): ChangeCounts {
    const counts = Object.fromEntries(KINDS.map((k) => [k, 0])) as ChangeCounts;
    for (const c of changes) counts[c.kind]++;
    return counts;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}
