import type { SimHost } from "./host.js";
import type { EventQueue } from "./queue.js";
import type { SimStore } from "./shard-store.js";

/** What the timeline can do to the shard side. */
export interface ShardFaults {
  crash(host: SimHost): void;
  /** SIGTERM: leases handed back */
  stop(host: SimHost): void;
  start(host: SimHost): void;
  pause(host: SimHost, untilUs: number): void;
  redisRestart(downUs: number): void;
  /** the replica to be promoted at the next failover stops following the master */
  replicaStops(): void;
  /** the master is lost; the replica is promoted, and reached after `downUs` */
  redisFailover(downUs: number): void;
  clockRate(host: SimHost, rate: number): void;
}

/** What the faults ask of the agents' keepers (the shards mode's driver). */
export interface KeeperHosts {
  /** Start `host`'s agent: its keepers stand by (`warm`: as in steady state at time 0). */
  start(host: SimHost, warm: boolean): void;
  /** End `host`'s agent (`graceful`: SIGTERM, its leases handed back). */
  stop(host: SimHost, graceful: boolean): void;
  /** `host` froze: its holders' deadlines get a watch of their own. */
  froze(host: SimHost): void;
  /** `host`'s clock changed pace: its timers follow it, where the driver's can, and its holders' deadlines get a watch. */
  paceChanged(host: SimHost): void;
}

/** The timeline's faults on the agents' hosts and on the store. */
export function shardFaults(agents: KeeperHosts, store: SimStore, queue: EventQueue): ShardFaults {
  return {
    crash: (h) => agents.stop(h, false),
    stop: (h) => agents.stop(h, true),
    start: (h) => {
      if (h.up) agents.stop(h, false);
      agents.start(h, false);
    },
    pause: (h, untilUs) => {
      if (h.freeze(untilUs)) agents.froze(h);
    },
    redisRestart: (downUs) => store.restart(queue.now, downUs),
    replicaStops: () => store.replicaStops(),
    redisFailover: (downUs) => store.failover(queue.now, downUs),
    clockRate: (h, rate) => {
      h.setRate(rate);
      agents.paceChanged(h);
    },
  };
}
