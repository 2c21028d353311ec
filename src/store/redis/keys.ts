/**
 * Redis key layout. Every key of one shard shares the hash tag `{shard:NAME}` so each
 * script touches a single slot and runs unchanged on Redis Cluster. Shard names cannot
 * contain braces (see ShardName), so the tag is unambiguous.
 */
export interface KeyLayout {
  lease(shard: string): string;
  agents(): string;
}

export function keyLayout(namespace = "sb"): KeyLayout {
  return {
    lease: (shard) => `${namespace}:{shard:${shard}}:lease`,
    agents: () => `${namespace}:agents`,
  };
}
