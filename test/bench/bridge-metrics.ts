/**
 * What a bridge says of its own event loop at /metrics (prom-client's default metrics):
 * the loop's delay since the last scrape (a scrape resets it), and its garbage-collection
 * pauses so far (a cumulative histogram: compare two readings).
 */
export interface LoopReading {
  /** the longest the loop went without running its timers since the last scrape, ms */
  maxMs: number;
  p99Ms: number;
  /** GC pauses so far, and how many of them took longer than 10 ms */
  gcPauses: number;
  gcPausesOver10Ms: number;
}

export async function readLoop(url: string): Promise<LoopReading> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const gauge = (name: string) =>
    Number(new RegExp(`^shardbridge_nodejs_${name} (\\S+)$`, "m").exec(text)?.[1]) * 1000;
  // Summed over the kinds of GC (minor, major, incremental, weakcb).
  const gcSum = (suffix: string) =>
    [...text.matchAll(new RegExp(`^shardbridge_nodejs_gc_duration_seconds_${suffix} (\\S+)$`, "gm"))].reduce(
      (sum, match) => sum + Number(match[1]),
      0,
    );
  const gcPauses = gcSum('count\\{kind="[a-z]+"\\}');
  const gcWithin10Ms = gcSum('bucket\\{le="0\\.01",kind="[a-z]+"\\}');
  return {
    maxMs: gauge("eventloop_lag_max_seconds"),
    p99Ms: gauge("eventloop_lag_p99_seconds"),
    gcPauses,
    gcPausesOver10Ms: gcPauses - gcWithin10Ms,
  };
}
