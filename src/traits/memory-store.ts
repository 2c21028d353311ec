import { EMPTY_TRAIT_RECORD, type TraitBackend, type TraitRecord } from "./store-port.js";

/** Traits in this process's memory (the embedded store). */
export class MemoryTraits implements TraitBackend {
  private readonly records = new Map<string, TraitRecord>();
  private readonly deliveries = new Map<string, { outcome: string; expiresAt: number }>();

  async read(uuid: string): Promise<TraitRecord> {
    return structuredClone(this.records.get(uuid) ?? EMPTY_TRAIT_RECORD);
  }

  async commit(uuid: string, expected: number, next: TraitRecord): Promise<boolean> {
    if ((this.records.get(uuid)?.generation ?? 0) !== expected) return false;
    this.records.set(uuid, structuredClone(next));
    return true;
  }

  async delivery(id: string): Promise<string | null> {
    const seen = this.deliveries.get(id);
    if (seen === undefined || seen.expiresAt < Date.now()) return null;
    return seen.outcome;
  }

  async recordDelivery(id: string, outcome: string, ttlSeconds: number): Promise<void> {
    this.deliveries.set(id, { outcome, expiresAt: Date.now() + ttlSeconds * 1000 });
  }
}
