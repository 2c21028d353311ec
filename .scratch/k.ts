import { buildRing } from "../src/ring/legacy.ts";
const r = buildRing("ketama", ["a","b","c"]);
console.log(r.memberOf("00000000-0000-0000-0000-000000000001"), buildRing("ketama", []).memberOf("x"));
