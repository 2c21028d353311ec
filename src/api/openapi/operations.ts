import { AGENT_OPERATIONS } from "../routes/agents.js";
import { FEED_OPERATIONS } from "../routes/feed.js";
import { FENCED_OPERATIONS } from "../routes/fenced-ironic.js";
import { HEALTH_OPERATIONS } from "../routes/health.js";
import { TRAIT_OPERATIONS } from "../routes/inspector.js";
import { IRONIC_DELIVERY_OPERATIONS } from "../routes/ironic-delivery.js";
import { LEASE_OPERATIONS } from "../routes/leases.js";
import { NODE_OPERATIONS } from "../routes/nodes.js";
import { SHARD_DEFINITION_OPERATIONS } from "../routes/shard-definitions.js";
import { SHARD_OPERATIONS } from "../routes/shards.js";
import { METRICS_OPERATIONS } from "../http/metrics.js";
import { PAGE_OPERATIONS } from "../ui/routes.js";
import type { Role } from "../../runtime/tokens-file.js";
import { declaredRoles, type Operation } from "./operation.js";

/**
 * Every operation the bridge serves, in the document's order; each is declared beside its
 * handlers in its route file (operation.ts says what a declaration holds). A route added
 * to the app goes here too: the contract test compares this list with the routes the app
 * mounts, both ways, and calls each operation for each of its answers; the builder
 * (document.ts) adds the refusals an operation shares with others.
 */
export const OPERATIONS: Operation[] = [
  HEALTH_OPERATIONS.health,
  HEALTH_OPERATIONS.ready,
  METRICS_OPERATIONS.metrics,
  HEALTH_OPERATIONS.openapi,
  ...Object.values(LEASE_OPERATIONS),
  ...Object.values(SHARD_OPERATIONS),
  ...Object.values(SHARD_DEFINITION_OPERATIONS),
  ...Object.values(NODE_OPERATIONS),
  TRAIT_OPERATIONS.getNodeTraits,
  TRAIT_OPERATIONS.resetNodeTraits,
  ...Object.values(AGENT_OPERATIONS),
  TRAIT_OPERATIONS.inspectorWebhook,
  ...Object.values(FEED_OPERATIONS),
  ...Object.values(IRONIC_DELIVERY_OPERATIONS),
  ...Object.values(PAGE_OPERATIONS),
  ...FENCED_OPERATIONS,
];

/** The roles the operation `id` takes, as its route declares them (declaredRoles): for the contract test, which looks operations up by id. */
export function rolesOf(id: string): readonly Role[] {
  const operation = OPERATIONS.find((op) => op.id === id);
  if (operation === undefined) throw new Error(`no operation ${id} in OPERATIONS`);
  return declaredRoles(operation);
}
