import { randomUUID } from "node:crypto";
import type {
  DefinitionBackend,
  DefinitionEntry,
  DefinitionWrite,
  DefinitionsRead,
  DefinitionsSeen,
} from "../ports/definitions.js";
import { shardKey } from "../../core/names.js";

/**
 * The wall clock to the microsecond, as Redis's TIME: Date.now() alone has milliseconds,
 * and a write in the same millisecond as a copy's newest entry would rank below it.
 */
const wallUs = (): number =>
  Math.max(Date.now() * 1000, Math.floor((performance.timeOrigin + performance.now()) * 1000));

/**
 * Definitions in this process's memory (the embedded store); each write is one
 * synchronous step. `nowUs`: the clock versions are taken from (wall time, as Redis's
 * TIME: a bridge restarted on an empty embedded store stamps its writes above those of
 * the process before it, which its backup file may bring back).
 */
export class MemoryDefinitions implements DefinitionBackend {
  private readonly entries = new Map<string, DefinitionEntry>();
  /** each live record's name by its key (see DefinitionBackend.write) */
  private readonly names = new Map<string, string>();
  private current = 0;
  /** new with every process: an embedded store always starts empty */
  private readonly mark: string = randomUUID();

  constructor(private readonly nowUs: () => number = wallUs) {}

  async read(seen: DefinitionsSeen): Promise<DefinitionsRead> {
    const whole = seen.mark !== this.mark || seen.version > this.current;
    const entries = new Map<string, DefinitionEntry>();
    for (const [name, entry] of this.entries)
      if (whole || entry.version > seen.version) entries.set(name, { ...entry });
    return { version: this.current, mark: this.mark, whole, entries };
  }

  /** A live record other than `name`'s under `key`, if there is one. */
  private twinOf(name: string, key: string): string | undefined {
    const twin = this.names.get(key);
    return twin !== undefined && twin !== name && this.entries.get(twin)?.record != null ? twin : undefined;
  }

  async write(name: string, key: string, record: string | null): Promise<DefinitionWrite> {
    const twin = record === null ? undefined : this.twinOf(name, key);
    if (twin !== undefined) return { caseTwin: twin };
    if (record !== null) this.names.set(key, name);
    else if (this.names.get(key) === name) this.names.delete(key);
    const existed = this.entries.get(name)?.record != null;
    this.current = Math.max(this.current + 1, Math.floor(this.nowUs()));
    this.entries.set(name, { version: this.current, record });
    return { existed, version: this.current };
  }

  async restore(copy: ReadonlyMap<string, DefinitionEntry>): Promise<{ restored: number }> {
    let restored = 0;
    for (const [name, entry] of copy) {
      const held = this.entries.get(name);
      if (held !== undefined && held.version >= entry.version) continue;
      const key = shardKey(name);
      if (entry.record !== null) {
        if (this.twinOf(name, key) !== undefined) continue;
        this.names.set(key, name);
      } else if (this.names.get(key) === name) this.names.delete(key);
      this.entries.set(name, { ...entry });
      this.current = Math.max(this.current, entry.version);
      restored++;
    }
    return { restored };
  }

  async volatility(): Promise<string | null> {
    return "the embedded store lives in this bridge's process: it starts empty with every start";
  }
}
