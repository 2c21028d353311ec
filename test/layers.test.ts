import { expect } from "chai";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/*
 * The folder order docs/ARCHITECTURE.md gives ("Layers (bottom up)", listed top down), held
 * to the code: each entry may import only entries listed below it.
 */

const repo = fileURLToPath(new URL("..", import.meta.url));
const src = join(repo, "src");

/** The entries of the layer list, top first: folders of src/ and the modules at its root. */
function layerList(): string[] {
  const doc = readFileSync(join(repo, "docs/ARCHITECTURE.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Layers (bottom up)"));
  const block = /```\n([\s\S]*?)```/.exec(section)![1]!;
  return block
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => line.split(/\s+/)[0]!);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** The entry a file of src/ belongs to: its top folder, or its own name at the root. */
const entryOf = (file: string): string => relative(src, file).split("/")[0]!;

/** The files of src/ a file imports (`type` imports too, unless `values` only). */
function importsOf(file: string, values = false): string[] {
  const text = readFileSync(file, "utf8");
  const pattern = values
    ? /^(?:import|export)\s+(?!type\b)[^;]*?\sfrom\s+"(\.[^"]+)"/gm
    : /(?:\sfrom\s+|\bimport\s*\(?\s*)"(\.[^"]+)"/g;
  return [...text.matchAll(pattern)].map((m) => resolve(dirname(file), m[1]!).replace(/\.js$/, ".ts"));
}

/** The imports in `edges` (importer, imported) that do not run down `layers`, said in words. */
function upward(edges: ReadonlyArray<readonly [string, string]>, layers: readonly string[]): string[] {
  const rank = new Map(layers.map((entry, i) => [entry, i]));
  return edges.flatMap(([file, target]) => {
    const [from, to] = [entryOf(file), entryOf(target)];
    if (from === to || rank.get(to)! > rank.get(from)!) return [];
    return [`${relative(repo, file)} imports ${relative(repo, target)} (${to} is not below ${from})`];
  });
}

describe("The layers of src/, as docs/ARCHITECTURE.md lists them", () => {
  const layers = layerList();
  const files = sourceFiles(src);

  it("lists every folder and root module of src/, once", () => {
    const entries = [...new Set(files.map(entryOf))].sort();
    expect([...layers].sort()).to.deep.equal(entries);
  });

  it("has every import run down the list: no entry imports one above it or beside it", () => {
    const edges = files.flatMap((file) => importsOf(file).map((target) => [file, target] as const));
    expect(upward(edges, layers)).to.deep.equal([]);
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

  it("catches what it is for: an import up the list", () => {
    const at = (path: string) => join(src, path);
    const edges = [
      [at("domain/names.ts"), at("api/app.ts")],
      [at("text/table.ts"), at("text/json-list.ts")],
      [at("api/app.ts"), at("text/table.ts")],
      [at("log.ts"), at("config.ts")],
    ] as const;
    expect(upward(edges, layers)).to.deep.equal([
      "src/domain/names.ts imports src/api/app.ts (api is not below domain)",
      "src/log.ts imports src/config.ts (config.ts is not below log.ts)",
    ]);
  });
});
