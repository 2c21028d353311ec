import { expect } from "chai";
import { Counter, Histogram, Registry } from "prom-client";
import { CellCounter, CellHistogram } from "../src/api/metric-cells.js";

/**
 * The cell metrics print what prom-client's own metrics print for the same events: the
 * same registry renders both, side by side, and the texts must be equal line for line
 * (values on a bound, past the last bound, several label sets, a reset).
 */
describe("Metric cells: prom-client's exposition at a few number writes per event", () => {
  const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.1];
  const VALUES = [0, 0.0004, 0.001, 0.001, 0.0024999, 0.0025, 0.0071, 0.01, 0.05, 0.1, 0.10001, 3, 1e-9];

  function pair() {
    const ours = new Registry();
    const theirs = new Registry();
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

  it("keeps a cell's counts across lookups; a reset zeroes them and a cell held before it counts on", async () => {
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
