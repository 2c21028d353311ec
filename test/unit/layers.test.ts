import { expect } from "chai";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/*
 * The tiers docs/ARCHITECTURE.md gives ("Tiers": a table, each tier with the tiers it may
 * import), held to the code: no import up the table or sideways, no folder left out.
 */

const repo = fileURLToPath(new URL("../..", import.meta.url));
const src = join(repo, "src");

/** Each tier of the table and the tiers it may import. */
function tierTable(): Map<string, Set<string>> {
  const doc = readFileSync(join(repo, "docs/ARCHITECTURE.md"), "utf8");
  const start = doc.indexOf("## Tiers");
  const section = doc.slice(start, doc.indexOf("\n## ", start + 1));
  const rows = [...section.matchAll(/^\|\s*`([a-z]+)`\s*\|([^|]+)\|/gm)];
  return new Map(
    rows.map(([, tier, imports]) => [
      tier!,
      new Set(imports!.trim() === "—" ? [] : imports!.split(",").map((name) => name.trim())),
    ]),
  );
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** The tier a file of src/ belongs to: its top folder, or its own name at the root (cli.ts: cli). */
const tierOf = (file: string): string => relative(src, file).split("/")[0]!.replace(/\.ts$/, "");

/** The files of src/ a file imports (`type` imports too, unless `values` only). */
function importsOf(file: string, values = false): string[] {
  const text = readFileSync(file, "utf8");
  const pattern = values
    ? /^(?:import|export)\s+(?!type\b)[^;]*?\sfrom\s+"(\.[^"]+)"/gm
    : /(?:\sfrom\s+|\bimport\s*\(?\s*)"(\.[^"]+)"/g;
  return [...text.matchAll(pattern)].map((m) => resolve(dirname(file), m[1]!).replace(/\.js$/, ".ts"));
}

/** The imports in `edges` (importer, imported) that the importer's tier may not make, said in words. */
function forbidden(
  edges: ReadonlyArray<readonly [string, string]>,
  tiers: Map<string, Set<string>>,
): string[] {
  return edges.flatMap(([file, target]) => {
    const [from, to] = [tierOf(file), tierOf(target)];
    if (from === to || tiers.get(from)?.has(to)) return [];
    return [`${relative(repo, file)} imports ${relative(repo, target)} (${from} may not import ${to})`];
  });
}

describe("The tiers of src/, as docs/ARCHITECTURE.md lists them", () => {
  const tiers = tierTable();
  const files = sourceFiles(src);

  it("lists every folder of src/ (and cli.ts) as a tier, once, each importing only tiers below it", () => {
    const folders = [...new Set(files.map(tierOf))].sort();
    expect([...tiers.keys()].sort()).to.deep.equal(folders);
    // Rows may import only rows below them: the table is an order, with no cycle between tiers.
    const order = [...tiers.keys()];
    for (const [tier, imports] of tiers)
      for (const name of imports)
        expect(order.indexOf(name), `${tier} may import ${name}: not a tier below it`).to.be.above(
          order.indexOf(tier),
        );
  });

  it("has every import allowed by the importer's row: none up the table, none sideways", () => {
    const edges = files.flatMap((file) => importsOf(file).map((target) => [file, target] as const));
    expect(forbidden(edges, tiers)).to.deep.equal([]);
  });

  it("has no cycle of value imports between files", () => {
    const graph = new Map(files.map((file) => [file, importsOf(file, true)]));
    const cycles: string[] = [];
    const done = new Set<string>();
    const path: string[] = [];
    const visit = (file: string): void => {
      if (done.has(file)) return;
      const at = path.indexOf(file);
      if (at >= 0) {
        cycles.push([...path.slice(at), file].map((f) => relative(src, f)).join(" -> "));
        return;
      }
      path.push(file);
      for (const next of graph.get(file) ?? []) visit(next);
      path.pop();
      done.add(file);
    };
    for (const file of files) visit(file);
    expect(cycles).to.deep.equal([]);
  });

  it("catches what it is for: an import up the table, and one sideways", () => {
    const at = (path: string) => join(src, path);
    const edges = [
      [at("core/names.ts"), at("api/app.ts")],
      [at("agent/bridge-client.ts"), at("store/store.ts")],
      [at("store/store.ts"), at("store/redis/keys.ts")],
      [at("cli.ts"), at("cli/serve.ts")],
      [at("api/app.ts"), at("bridge/trait-service.ts")],
    ] as const;
    expect(forbidden(edges, tiers)).to.deep.equal([
      "src/core/names.ts imports src/api/app.ts (core may not import api)",
      "src/agent/bridge-client.ts imports src/store/store.ts (agent may not import store)",
    ]);
  });
});
