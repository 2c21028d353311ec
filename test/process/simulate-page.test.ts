import { expect } from "chai";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Page } from "playwright-core";
import { reportHtml, timeTicks } from "../../src/tools/sim/html.js";
import { parseScenario } from "../../src/tools/sim/scenario.js";
import { simulate } from "../../src/tools/sim/simulate.js";
import { openBrowser } from "../helpers/browser.js";

const scenarioFile = (name: string) =>
  join(import.meta.dirname, "..", "..", "examples", "scenarios", `${name}.json`);

/** The simulator's page as an operator opens it: Debian's chromium on the file it wrote. */
describe("The simulator's page, in a real browser", function () {
  this.timeout(60_000);
  let dir: string;
  let browser: Awaited<ReturnType<typeof openBrowser>>;
  let page: Page;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "sb-sim-page-"));
    browser = await openBrowser({ width: 1100, height: 900 });
    page = await browser.context.newPage();
  });
  after(async () => {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = async (scenario: string) => {
    const path = scenarioFile(scenario);
    const report = simulate(parseScenario(readFileSync(path, "utf8"), path));
    const file = join(dir, `${scenario}.html`);
    writeFileSync(file, reportHtml(report));
    await page.goto(pathToFileURL(file).href);
    return { report, html: readFileSync(file, "utf8") };
  };

  it("draws the two modes' headline numbers side by side, each bar as long as its number", async () => {
    const { report } = await open("single-crash");
    const metrics = await page.locator("svg.headline g.metric").evaluateAll((groups) =>
      groups.map((g) => ({
        name: g.getAttribute("data-metric"),
        widths: [...g.querySelectorAll("rect")].map((r) => r.getBoundingClientRect().width),
        values: [...g.querySelectorAll("text")].slice(1).map((t) => t.textContent),
      })),
    );
    expect(metrics.map((m) => m.name)).to.deep.equal([
      "unmanaged node-seconds",
      "double-managed node-seconds",
      "nodes moved",
      "worst time to recover, s",
      "p99 time to recover, s",
    ]);
    const unmanaged = metrics[0]!;
    expect(unmanaged.values).to.deep.equal(["615.8", "5,071.5"]);
    const [shards, ring] = unmanaged.widths as [number, number];
    const expected = report.shardsMode.unmanagedNodeSeconds / report.legacyMode.unmanagedNodeSeconds;
    expect(shards / ring).to.be.closeTo(expected, 0.01);
    const legend = await page.locator("svg.headline g.legend").textContent();
    expect(legend).to.include("shards with leases").and.include("nova's ring");
  });

  it("has a legend naming every agent colour the charts use, and ticks along each time axis", async () => {
    await open("single-crash");
    const legend = await page
      .locator("ul.legend.agents li")
      .evaluateAll((items) =>
        items.map((li) => [li.textContent, li.querySelector("rect")?.getAttribute("fill")]),
      );
    expect(legend.map(([name]) => name)).to.include.members(["compute-0", "compute-1", "compute-19"]);
    const legendColours = new Set(legend.map(([, fill]) => fill));
    expect(legendColours.size).to.equal(legend.length); // one colour per agent
    const used = await page
      .locator("svg.lanes rect")
      .evaluateAll((rects) => [...new Set(rects.map((r) => r.getAttribute("fill")))]);
    for (const colour of used) expect(legendColours, `${colour} in the legend`).to.include(colour);
    // Every chart has its time axis, from 0 to the scenario's end, every label inside the page.
    const axes = await page.locator("svg.lanes, svg.over-time").evaluateAll((charts) =>
      charts.map((svg) => {
        const box = svg.getBoundingClientRect();
        const labels = [...svg.querySelectorAll("g.axis text")];
        return {
          labels: labels.map((t) => t.textContent),
          inside: labels.every((t) => {
            const r = t.getBoundingClientRect();
            return r.left >= box.left && r.right <= box.right;
          }),
        };
      }),
    );
    expect(axes).to.have.length(4);
    for (const axis of axes) {
      expect(axis.labels[0]).to.equal("0 min");
      expect(axis.labels.at(-1)).to.equal("5 min");
      expect(axis.inside).to.equal(true);
    }
    const faults = await page.locator("ol.faults li").allTextContents();
    expect(faults).to.deep.equal(["1 min (60 s): crash compute-0", "3 min (180 s): restart compute-0"]);
  });

  it("names at most 48 agents in the legend, and says how many more", async () => {
    // No shipped scenario shows more than 48 agents in its lanes: give one shard 60 holders in turn.
    const path = scenarioFile("single-crash");
    const report = simulate(parseScenario(readFileSync(path, "utf8"), path));
    for (let i = 0; i < 60; i++)
      report.shardsMode.activity.push({ lane: "shard-0", agent: `extra-${i}`, fromS: i, toS: i + 1 });
    const file = join(dir, "many.html");
    writeFileSync(file, reportHtml(report));
    await page.goto(pathToFileURL(file).href);
    const items = await page.locator("ul.legend.agents li").allTextContents();
    expect(items).to.have.length(49);
    expect(items.at(-1)).to.equal("and 32 more"); // 20 agents and 60 extras, 48 named
  });

  it("ticks time at round steps, at most ten of them, from 0 to the end", () => {
    expect(timeTicks(300).map((t) => t.label)).to.deep.equal(
      ["0", "0.5", "1", "1.5", "2", "2.5", "3", "3.5", "4", "4.5", "5"].map((m) => `${m} min`),
    );
    expect(timeTicks(60).map((t) => t.atS)).to.deep.equal([0, 10, 20, 30, 40, 50, 60]);
    expect(timeTicks(86_400).map((t) => t.label)).to.deep.equal([
      ...["0:00", "3:00", "6:00", "9:00", "12:00", "15:00", "18:00", "21:00", "24:00"].map((h) => `${h} h`),
    ]);
  });
});
