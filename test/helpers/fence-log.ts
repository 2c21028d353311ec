import { expect } from "chai";
import type { AgentEvent } from "./agent-process.js";

/**
 * Safety checks read from the agents' own logs (test/fixtures/lease-agent.ts): what each
 * agent did while it believed it held the lease, and what `fence` allowed.
 */

/**
 * Group the selected events by token, require that each token belongs to one agent, and
 * that no token passed before an older one last did: every event of a token happened
 * (by `at`: when it was sent, when it was answered) after every event of every lower
 * token. With one instant per event (`sent` = `answered`) that is "the spans of the
 * tokens do not overlap, in token order"; with an interval it fails only on what is
 * certain — an older token sent after a newer one was already answered. Returns how many
 * events were selected.
 */
export function assertTokenSpansDisjoint(
  events: AgentEvent[],
  select: (e: AgentEvent) => boolean,
  at: (e: AgentEvent) => readonly [sent: number, answered: number],
  what: string,
): number {
  const spans = new Map<number, { agent: string; lastSent: number; firstAnswered: number }>();
  let selected = 0;
  for (const e of events) {
    if (!select(e)) continue;
    selected++;
    const token = e.token as number;
    const [sent, answered] = at(e);
    const span = spans.get(token) ?? { agent: e.agent, lastSent: sent, firstAnswered: answered };
    expect(span.agent, `${what}: token ${token} used by two agents`).to.equal(e.agent);
    span.lastSent = Math.max(span.lastSent, sent);
    span.firstAnswered = Math.min(span.firstAnswered, answered);
    spans.set(token, span);
  }
  let latest: { token: number; agent: string; sent: number } | null = null;
  for (const [token, span] of [...spans.entries()].sort(([a], [b]) => a - b)) {
    if (latest !== null)
      expect(
        latest.sent,
        `${what}: ${latest.agent} under ${latest.token} still at ${latest.sent}, after ${span.agent} under the newer ${token} at ${span.firstAnswered}`,
      ).to.be.below(span.firstAnswered);
    if (latest === null || span.lastSent > latest.sent)
      latest = { token, agent: span.agent, sent: span.lastSent };
  }
  return selected;
}

/**
 * What the store allowed: no token older than one that already passed `fence` passed
 * afterwards, and no token passed for two agents. By the store's clock where the write
 * says it (the store itself), else by the agent's (through a bridge: one machine, one
 * clock) from when it sent the write to when the answer came.
 */
export function assertNoOverlappingWriters(events: AgentEvent[]): number {
  return assertTokenSpansDisjoint(
    events,
    (e) => e.ev === "write" && e.allowed === true,
    (e) => (typeof e.atUs === "number" ? [e.atUs, e.atUs] : [e.sentAt as number, e.t]),
    "writes fence allowed",
  );
}

/**
 * What the agents themselves did: every write an agent attempted while its keeper said
 * it was active, by wall time (one machine, one clock): no two agents acting at once,
 * whatever the store said. And once an agent reported `lost`, it attempts nothing as
 * active until it is granted a lease again.
 */
export function assertAgentsNeverActedTogether(events: AgentEvent[]): void {
  assertTokenSpansDisjoint(
    events,
    (e) => e.ev === "attempt" && e.believedActive === true,
    (e) => [e.t, e.t],
    "writes agents attempted as active",
  );
  const byAgent = new Map<string, AgentEvent[]>();
  for (const e of events) byAgent.set(e.agent, [...(byAgent.get(e.agent) ?? []), e]);
  for (const [agent, own] of byAgent) {
    let stopped = false;
    for (const e of own) {
      if (e.ev === "lost") stopped = true;
      if (e.ev === "active") stopped = false;
      if (stopped && e.ev === "attempt")
        expect(e.believedActive, `${agent} acted after losing its lease`).to.equal(false);
    }
  }
}

/** One agent's time of acting by its own log: from `active` to `lost`/`released` (or still). */
export interface Spell {
  agent: string;
  token: number;
  /** wall ms */
  from: number;
  to: number;
}

/** Every agent's spells of acting, from its `active`, `lost` and `released` lines (wall ms in `t`). */
export function spellsOf(logs: Array<{ name: string; events: AgentEvent[] }>): Spell[] {
  return logs.flatMap(({ name, events }) => {
    const out: Spell[] = [];
    let open: { token: number; from: number } | null = null;
    for (const e of events) {
      if (e.ev === "active") open = { token: Number(e.token), from: e.t };
      if ((e.ev === "lost" || e.ev === "released") && open !== null) {
        out.push({ agent: name, ...open, to: e.t });
        open = null;
      }
    }
    if (open !== null) out.push({ agent: name, ...open, to: Infinity });
    return out;
  });
}

/** Never two agents active at once by their own logs, and a higher token at every new holder. */
export function assertSpellsInTurn(spells: Spell[]): void {
  const all = [...spells].sort((x, y) => x.from - y.from);
  for (let i = 1; i < all.length; i++) {
    expect(all[i]!.from, `${all[i]!.agent} active before ${all[i - 1]!.agent} stopped`).to.be.at.least(
      all[i - 1]!.to,
    );
    expect(all[i]!.token, "tokens rise at every new holder").to.be.above(all[i - 1]!.token);
  }
}
