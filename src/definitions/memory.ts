import type { DefinitionBackend, DefinitionWrite, DefinitionWritten } from "./port.js";

/** Definitions in this process's memory (the embedded store); each write is one synchronous step. */
export class MemoryDefinitions implements DefinitionBackend {
  private readonly records = new Map<string, string>();
  /** each record's name by its key (see DefinitionBackend.write) */
  private readonly names = new Map<string, string>();
  private current = 0;

  async version(): Promise<number> {
    return this.current;
  }

  async list(): Promise<{ version: number; records: Map<string, string> }> {
    return { version: this.current, records: new Map(this.records) };
  }

  async write(name: string, key: string, record: string): Promise<DefinitionWrite> {
    const twin = this.names.get(key);
    if (twin !== undefined && twin !== name) return { caseTwin: twin };
    const existed = this.records.has(name);
    this.records.set(name, record);
    this.names.set(key, name);
    return { existed, version: ++this.current };
  }

  async remove(name: string, key: string): Promise<DefinitionWritten> {
    const existed = this.records.delete(name);
    if (this.names.get(key) === name) this.names.delete(key);
    return { existed, version: ++this.current };
  }
}
