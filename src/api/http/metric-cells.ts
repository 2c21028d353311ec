import type { Metric, MetricValueWithName, Registry, RegistryContentType } from "prom-client";

/** A prom-client registry, of either exposition format. */
type AnyRegistry = Registry<RegistryContentType>;

type Labels = Readonly<Record<string, string>>;

/**
 * Counters and histograms for what every request records, at the cost of a few number
 * writes per event; prom-client's registry still renders them, with its others, at a scrape.
 *
 * Why not prom-client's own Counter and Histogram here: each `inc` or `observe` — on a
 * child from `labels()` too, which only hands its labels back — validates the labels
 * against the metric's names, builds their hash string, and allocates (`inc` a result
 * object; a direct `observe` a closure); a histogram then tests and increments its bucket
 * by a float-keyed property, the bound made a property key each time. In a tight loop that
 * is about 1 µs; beside a renew's other work it cost 8–10 µs of the ~50–60 µs a renew
 * costs (a scratch renew server, the same wrk load, with and without, eight alternating
 * rounds: #11). Here each label set is a cell, found by its values through a map per label
 * (or kept by its caller); an event adds to it.
 *
 * Each class is a prom-client Metric in what the registry reads (name, help, type,
 * aggregator, get, reset): its text exposition, Prometheus or OpenMetrics, is what
 * prom-client's own metric of the same kind prints for the same events
 * (test/unit/metric-cells.test.ts renders both). Where they differ, on purpose: a reset keeps
 * every series at zero (prom-client drops them) so that cells callers hold stay valid; a
 * non-finite observation is dropped, not thrown; registry default labels (unused here)
 * would come after a histogram's own labels, not before.
 */
abstract class CellMetric<Cell> {
  readonly aggregator = "sum" as const;
  /** every label set seen, with its cell, in the order first seen (what a scrape prints) */
  private readonly series: Array<{ labels: Labels; cell: Cell }> = [];
  /** the cells by label values, one level of maps per label name (no key built per event) */
  private readonly index = new Map<string, unknown>();
  private unlabelled: Cell | undefined;

  protected constructor(
    /** not readonly: an OpenMetrics scrape renames a counter (Registry's standardizeCounterName) */
    public name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    registry: AnyRegistry,
  ) {
    // prom-client's registry takes any object that reads as a Metric; its type lists its own classes.
    registry.registerMetric(this as unknown as Metric);
  }

  /**
   * The cell of the label values given in the order of the metric's label names: count
   * into it, or keep it. Label values must be bounded by the caller (routes from the code,
   * statuses, shards through BridgeMetrics.shardLabel).
   */
  at(...values: string[]): Cell {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name}: ${values.length} label values for ${this.labelNames.join(",")}`);
    if (values.length === 0) return (this.unlabelled ??= this.newSeries(values));
    // One walk: a label value not seen yet gets its map (or, last, its cell) on the way.
    let level = this.index;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    let cell = level.get(values[last]!) as Cell | undefined;
    if (cell === undefined) level.set(values[last]!, (cell = this.newSeries(values)));
    return cell;
  }

  /** The cell of one label set, named (every name of the metric, none other): see `at`. */
  cell(labels: Labels = {}): Cell {
    const names = Object.keys(labels);
    if (names.length !== this.labelNames.length || !names.every((n) => this.labelNames.includes(n)))
      throw new Error(`${this.name}: labels ${names.join(",")} are not ${this.labelNames.join(",")}`);
    return this.at(...this.labelNames.map((n) => labels[n]!));
  }

  /** A new cell for `values`, among the series a scrape prints. */
  private newSeries(values: readonly string[]): Cell {
    const cell = this.newCell();
    this.series.push({ labels: Object.fromEntries(this.labelNames.map((n, i) => [n, values[i]!])), cell });
    return cell;
  }

  protected abstract newCell(): Cell;
  protected abstract values(labels: Labels, cell: Cell): Array<MetricValueWithName<string>>;

  /**
   * What the registry renders (Registry.getMetricsAsString reads this shape at run time;
   * prom-client's typings give `type` as an enum its code does not use).
   */
  get(): Promise<{
    name: string;
    help: string;
    type: string;
    aggregator: string;
    values: Array<MetricValueWithName<string>>;
  }> {
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: this.series.flatMap(({ labels, cell }) => this.values(labels, cell)),
    });
  }

  abstract readonly type: "counter" | "histogram";

  /** Registry.resetMetrics: every count back to zero (the cells callers hold stay valid). */
  reset(): void {
    for (const { cell } of this.series) this.zero(cell);
  }

  protected abstract zero(cell: Cell): void;
}

/** One counter series. */
export class CounterCell {
  value = 0;

  /** One more (every caller counts events one at a time; prom-client's `inc(n)` is not needed). */
  inc(): void {
    this.value += 1;
  }
}

export class CellCounter extends CellMetric<CounterCell> {
  readonly type = "counter" as const;

  constructor(options: {
    name: string;
    help: string;
    labelNames?: readonly string[];
    registry: AnyRegistry;
  }) {
    super(options.name, options.help, options.labelNames ?? [], options.registry);
  }

  protected newCell(): CounterCell {
    return new CounterCell();
  }

  protected values(labels: Labels, cell: CounterCell): Array<MetricValueWithName<string>> {
    return [{ labels, value: cell.value, metricName: this.name }];
  }

  protected zero(cell: CounterCell): void {
    cell.value = 0;
  }
}

/** One histogram series: a count per bucket (not yet cumulative), the sum and the count. */
export class HistogramCell {
  /** per bound, then one for above the last */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: Float64Array) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    // prom-client throws here; a request is not failed for its metrics, nor counted so.
    if (!Number.isFinite(value)) return;
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]! += 1;
    this.sum += value;
    this.count += 1;
  }
}

/** The buckets' upper bounds in order: finite and distinct, as prom-client has them. */
function sortedBounds(name: string, buckets: readonly number[]): Float64Array {
  const bounds = [...buckets].sort((a, b) => a - b);
  if (bounds.some((b, i) => !Number.isFinite(b) || b === bounds[i - 1]))
    throw new Error(`${name}: buckets must be finite and distinct`);
  return Float64Array.from(bounds);
}

export class CellHistogram extends CellMetric<HistogramCell> {
  readonly type = "histogram" as const;
  private readonly bounds: Float64Array;

  constructor(options: {
    name: string;
    help: string;
    labelNames?: readonly string[];
    buckets: readonly number[];
    registry: AnyRegistry;
  }) {
    // Checked before the registry has it: a histogram refused is not left registered.
    const bounds = sortedBounds(options.name, options.buckets);
    if (options.labelNames?.includes("le")) throw new Error(`${options.name}: le is a reserved label name`);
    super(options.name, options.help, options.labelNames ?? [], options.registry);
    this.bounds = bounds;
  }

  protected newCell(): HistogramCell {
    return new HistogramCell(this.bounds);
  }

  protected values(labels: Labels, cell: HistogramCell): Array<MetricValueWithName<string>> {
    const bucket = `${this.name}_bucket`;
    let below = 0;
    const lines: Array<MetricValueWithName<string>> = [...this.bounds].map((le, i) => {
      below += cell.counts[i]!;
      return { labels: { le, ...labels }, value: below, metricName: bucket };
    });
    lines.push(
      { labels: { le: "+Inf", ...labels }, value: cell.count, metricName: bucket },
      { labels, value: cell.sum, metricName: `${this.name}_sum` },
      { labels, value: cell.count, metricName: `${this.name}_count` },
    );
    return lines;
  }

  protected zero(cell: HistogramCell): void {
    cell.counts.fill(0);
    cell.sum = 0;
    cell.count = 0;
  }
}
