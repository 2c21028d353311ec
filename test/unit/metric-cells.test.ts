import { expect } from "chai";
import { Counter, Histogram, Registry, type RegistryContentType } from "prom-client";
import { CellCounter, CellHistogram } from "../../src/api/http/metric-cells.js";

/**
 * The cell metrics print what prom-client's own metrics print for the same events: two
 * registries, one with each, and their texts must be equal line for line (values on a
 * bound, past the last bound, several label sets, unlabelled, OpenMetrics). Where they
 * differ on purpose (a reset keeps the series at zero) the test says so.
 */
describe("Metric cells: prom-client's exposition at a few number writes per event", () => {
  const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.1];
  const VALUES = [0, 0.0004, 0.001, 0.001, 0.0024999, 0.0025, 0.0071, 0.01, 0.05, 0.1, 0.10001, 3, 1e-9];

  function pair(openMetrics = false) {
    const registry = () => {
      const made = new Registry<RegistryContentType>();
      if (openMetrics) made.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
      return made;
    };
    const ours = registry();
    const theirs = registry();
    const names = { name: "t_seconds", help: "a test histogram" };
    return {
      ours,
      theirs,
      histogram: new CellHistogram({ ...names, labelNames: ["route"], buckets: BUCKETS, registry: ours }),
      reference: new Histogram({ ...names, labelNames: ["route"], buckets: BUCKETS, registers: [theirs] }),
      counter: new CellCounter({
        name: "t_total",
        help: "a test counter",
        labelNames: ["route", "status"],
        registry: ours,
      }),
      referenceCounter: new Counter({
        name: "t_total",
        help: "a test counter",
        labelNames: ["route", "status"],
        registers: [theirs],
      }),
    };
  }

  it("renders histograms and counters exactly as prom-client does, per label set", async () => {
    const m = pair();
    const routes = ["/v1/a", "/v1/b/:id"];
    VALUES.forEach((value, i) => {
      const route = routes[i % 2]!;
      m.histogram.cell({ route }).observe(value);
      m.reference.observe({ route }, value);
      const status = i % 3 === 0 ? "409" : "200";
      // both ways of finding a cell: by named labels, and by values in the names' order
      if (i % 2 === 0) m.counter.cell({ route, status }).inc();
      else m.counter.at(route, status).inc();
      m.referenceCounter.inc({ route, status });
    });
    const text = await m.ours.metrics();
    expect(text).to.equal(await m.theirs.metrics());
    // Not vacuous: both hold the events.
    expect(text).to.include('t_seconds_bucket{le="0.001",route="/v1/a"}');
    expect(text).to.include('t_total{route="/v1/a",status="409"} 3');
  });

  it("renders the same OpenMetrics text, scrape after scrape (the registry renames counters)", async () => {
    const m = pair(true);
    for (const value of VALUES) {
      m.histogram.at("/a").observe(value);
      m.reference.observe({ route: "/a" }, value);
      m.counter.at("/a", "200").inc();
      m.referenceCounter.inc({ route: "/a", status: "200" });
      expect(await m.ours.metrics()).to.equal(await m.theirs.metrics());
    }
    expect(await m.ours.metrics()).to.include(`t_total{route="/a",status="200"} ${VALUES.length}`);
  });

  it("keeps one series for an unlabelled metric, however it is asked for", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const histogram = new CellHistogram({ name: "u_seconds", help: "h", buckets: BUCKETS, registry: ours });
    const reference = new Histogram({ name: "u_seconds", help: "h", buckets: BUCKETS, registers: [theirs] });
    histogram.at().observe(0.002);
    histogram.at().observe(0.02);
    histogram.cell().observe(0.2);
    for (const value of [0.002, 0.02, 0.2]) reference.observe(value);
    expect(await ours.metrics()).to.equal(await theirs.metrics());
    expect((await ours.metrics()).match(/^u_seconds_count/gm)).to.have.length(1);
  });

  it("refuses what prom-client refuses at construction, and registers nothing then", () => {
    const registry = new Registry();
    const make = (labelNames: string[], buckets: number[]) => () =>
      new CellHistogram({ name: "r_seconds", help: "h", labelNames, buckets, registry });
    expect(make(["le"], BUCKETS)).to.throw(/le is a reserved label name/);
    expect(make([], [0.1, 0.1])).to.throw(/finite and distinct/);
    expect(make([], [0.1, Number.NaN])).to.throw(/finite and distinct/);
    expect(registry.getMetricsAsArray()).to.have.length(0);
    expect(make([], [0.2, 0.1])).not.to.throw(); // given out of order: sorted, as prom-client does
  });

  it("keeps a cell's counts across lookups; a reset zeroes them (prom-client drops them) and a cell held before it counts on", async () => {
    const m = pair();
    const cell = m.histogram.cell({ route: "/x" });
    cell.observe(0.002);
    m.histogram.at("/x").observe(0.003);
    m.reference.observe({ route: "/x" }, 0.002);
    m.reference.observe({ route: "/x" }, 0.003);
    expect(await m.ours.metrics()).to.equal(await m.theirs.metrics());
    expect(await m.ours.metrics()).to.include('t_seconds_count{route="/x"} 2');

    m.ours.resetMetrics();
    cell.observe(0.02); // a cell held before the reset still counts
    expect(await m.ours.metrics()).to.include('t_seconds_count{route="/x"} 1');
    expect(await m.ours.metrics()).to.include('t_seconds_bucket{le="0.01",route="/x"} 0');
    expect(await m.ours.metrics()).to.include('t_seconds_bucket{le="0.1",route="/x"} 1');
  });

  it("refuses a label set that is not the metric's, and leaves a non-number uncounted", async () => {
    const m = pair();
    expect(() => m.histogram.cell({ path: "/x" })).to.throw(/labels path are not route/);
    expect(() => m.counter.cell({ route: "/x" })).to.throw(/are not route,status/);
    m.counter.at("/x", "200").inc(); // a known prefix must not lead a wrong count astray
    expect(() => m.counter.at("/x")).to.throw(/1 label values for route,status/);
    expect(() => m.counter.at("/x", "200", "extra")).to.throw(/3 label values/);
    const cell = m.histogram.cell({ route: "/x" });
    cell.observe(Number.NaN);
    cell.observe(Number.POSITIVE_INFINITY);
    expect(await m.ours.metrics()).to.include('t_seconds_count{route="/x"} 0');
  });
});
