/**
 * What a Lua file in this folder says of itself, in its first lines:
 *
 *     #!lua                                   (optional) Redis 7's flags line, sent first
 *     --! keys 1                              a script: how many KEYS it takes ("caller":
 *                                             the caller gives the count, as EVAL does)
 *     --! include clock numbers lease-common  the fragments sent before its own text, in order
 *     --! fragment                            not a script: text other scripts include
 *
 * The loader (scripts.ts) reads these, so a script's key count and preludes live in the
 * script and nowhere else. `clock` names the clock fragment the caller chose
 * (clock-server, or clock-virtual for the differential test).
 */
export type ScriptFile =
  | { kind: "fragment"; body: string }
  | { kind: "script"; shebang: string | null; keys: number | "caller"; includes: string[]; body: string };

/** A Lua file's header, read; `name` says which file a mistake is in. */
export function parseScriptFile(name: string, text: string): ScriptFile {
  const lines = text.split("\n");
  let at = 0;
  const shebang = lines[0]!.startsWith("#!") ? lines[at++]! : null;
  let keys: number | "caller" | undefined;
  let includes: string[] = [];
  let fragment = false;
  for (; at < lines.length && lines[at]!.startsWith("--!"); at++) {
    const [directive, ...words] = lines[at]!.slice(3).trim().split(/\s+/);
    if (directive === "keys" && words.length === 1 && (words[0] === "caller" || /^\d+$/.test(words[0]!)))
      keys = words[0] === "caller" ? "caller" : Number(words[0]);
    else if (directive === "include" && words.length > 0) includes = words;
    else if (directive === "fragment" && words.length === 0) fragment = true;
    else throw new Error(`${name}.lua line ${at + 1}: not a directive: ${lines[at]}`);
  }
  const body = lines.slice(at).join("\n");
  if (fragment) {
    if (keys !== undefined || includes.length > 0 || shebang !== null)
      throw new Error(`${name}.lua: a fragment has no keys, includes or flags line`);
    return { kind: "fragment", body };
  }
  if (keys === undefined) throw new Error(`${name}.lua: no "--! keys N" (or "--! fragment") header`);
  return { kind: "script", shebang, keys, includes, body };
}

/** A script's text as Redis runs it: its flags line first, then its fragments, then its own lines. */
export function assembleScript(
  script: Extract<ScriptFile, { kind: "script" }>,
  fragment: (name: string) => string,
): string {
  const parts = [...script.includes.map(fragment), script.body];
  return script.shebang === null ? parts.join("\n") : [script.shebang, ...parts].join("\n");
}
