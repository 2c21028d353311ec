import type { AgentLiveness } from "./ports/leases.js";

/** Agents listed by id in code-unit order, the same on every backend. */
export function sortAgents(seen: AgentLiveness[]): AgentLiveness[] {
  return seen.sort((a, b) => (a.agent < b.agent ? -1 : a.agent > b.agent ? 1 : 0));
}
