import { expect } from "chai";
import { assembleScript, parseScriptFile } from "../../src/store/redis/script-files.js";
import { scriptTexts } from "../../src/store/redis/scripts.js";

describe("Lua scripts declare themselves (src/store/redis/script-files.ts)", () => {
  it("reads a script's flags line, key count and fragments, and sends them in that order", () => {
    const file = parseScriptFile("renew", "#!lua\n--! keys 1\n--! include clock numbers\n-- renew\nreturn 1");
    expect(file).to.deep.equal({
      kind: "script",
      shebang: "#!lua",
      keys: 1,
      includes: ["clock", "numbers"],
      body: "-- renew\nreturn 1",
    });
    if (file.kind !== "script") throw new Error("a script");
    expect(assembleScript(file, (name) => `-- ${name}`)).to.equal(
      "#!lua\n-- clock\n-- numbers\n-- renew\nreturn 1",
    );
    expect(parseScriptFile("stats", "--! keys caller\nreturn 0")).to.include({
      keys: "caller",
      shebang: null,
    });
    expect(parseScriptFile("numbers", "--! fragment\nlocal x = 1")).to.deep.equal({
      kind: "fragment",
      body: "local x = 1",
    });
  });

  it("refuses a file that does not say what it is, naming the file and the line", () => {
    expect(() => parseScriptFile("a", "return 1")).to.throw('a.lua: no "--! keys N"');
    expect(() => parseScriptFile("b", "--! keys 1\n--! keyz 2\nreturn 1")).to.throw(
      "b.lua line 2: not a directive",
    );
    expect(() => parseScriptFile("c", "--! keys one\nreturn 1")).to.throw("c.lua line 1");
    expect(() => parseScriptFile("d", "--! fragment\n--! keys 1\n")).to.throw(
      "d.lua: a fragment has no keys",
    );
  });

  it("every shipped script loads with both clocks: the lease scripts flagged for Redis 7, the rest as written", () => {
    for (const clock of ["server", "virtual"] as const) {
      const texts = scriptTexts(clock);
      expect(texts.size).to.equal(19);
      for (const name of ["acquire", "renew", "release", "fence", "read"] as const) {
        expect(texts.get(name)!.lua.startsWith("#!lua\n"), name).to.equal(true);
        expect(texts.get(name)!.keys).to.equal(1);
      }
      expect(texts.get("heartbeat")!.lua).to.not.match(/^#!/);
      expect(texts.get("traits-commit")!.keys).to.equal(7);
      expect(texts.get("ironic-stats")!.keys).to.equal("caller");
      // No header line reaches Redis: each is read and dropped by the loader.
      for (const [name, { lua }] of texts) expect(lua, name).to.not.include("--!");
    }
  });
});
