import { ToozRing, novaRing } from "../src/ring/tooz.ts";
import { readFileSync } from "node:fs";
const v = JSON.parse(readFileSync("../shared/peers/ring-vectors.json","utf8"));
let diff=0;
for (const c of v.cases) { const r = new ToozRing(c.hosts.map((h:string)=>h.toLowerCase()), c.partitions ?? 32);
  for (const [n,h] of Object.entries(c.expected)) if (r.memberOf(n)!==h) diff++; }
console.log("diff", diff);
const r = novaRing(["ironic-a","ironic-b","ironic-c"]);
for (const n of ["00000000-0000-0000-0000-000000000001","00000000-0000-0000-0000-000000000002","1be26c0b-03f2-4d2e-ae87-c02d7f33c123","f0e1d2c3-b4a5-4697-8877-665544332211"]) console.log(n, r.memberOf(n), r.lookup(n,{ignore:["ironic-a"]}));
