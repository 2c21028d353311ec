import type { DefinitionBackend } from "./port.js";

/** Definitions in this process's memory (the embedded store); each write is one synchronous step. */
export class MemoryDefinitions implements DefinitionBackend {
  private readonly records = new Map<string, string>();
  private current = 0;

  async version(): Promise<number> {
    return this.current;
  }

  async list(): Promise<{ version: number; records: Map<string, string> }> {
    return { version: this.current, records: new Map(this.records) };
  }

  async write(name: string, record: string | null): Promise<{ existed: boolean; version: number }> {
    const existed = this.records.has(name);
    if (record === null) this.records.delete(name);
    else this.records.set(name, record);
    return { existed, version: ++this.current };
  }
}
