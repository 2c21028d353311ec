import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { buildRing } from "../../src/core/ring/legacy.js";
import { ToozRing, novaRing } from "../../src/core/ring/tooz.js";
import { randomUuid, seededRandom } from "../../src/runtime/random.js";
import { RING_VECTORS, toozMapping, toozUnavailable } from "../helpers/tooz.js";
import { SHARDBRIDGE } from "../helpers/cli.js";

function ringCli(args: string[], stdin: string): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(SHARDBRIDGE.command, [...SHARDBRIDGE.args, "ring", ...args], {
    input: stdin,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

const uuids = (seed: number, count: number) => {
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => randomUuid(random));
};

describe("Legacy ring: nova's tooz ring, bit for bit", () => {
  describe("pinned vectors", () => {
    it("maps the design notes' vectors, and with ironic-a ignored sends its nodes to ironic-c", () => {
      const ring = novaRing(["ironic-a", "ironic-b", "ironic-c"]);
      const expected = {
        "00000000-0000-0000-0000-000000000001": "ironic-b",
        "00000000-0000-0000-0000-000000000002": "ironic-a",
        "1be26c0b-03f2-4d2e-ae87-c02d7f33c123": "ironic-b",
        "f0e1d2c3-b4a5-4697-8877-665544332211": "ironic-a",
      };
      for (const [node, member] of Object.entries(expected))
        expect(ring.memberOf(node), node).to.equal(member);
      const ignoring = new ToozRing(["ironic-a", "ironic-b", "ironic-c"]);
      expect(ignoring.lookup("00000000-0000-0000-0000-000000000002", { ignore: ["ironic-a"] })).to.deep.equal(
        ["ironic-c"],
      );
      expect(ignoring.lookup("f0e1d2c3-b4a5-4697-8877-665544332211", { ignore: ["ironic-a"] })).to.deep.equal(
        ["ironic-c"],
      );
    });

    it("lower-cases hosts as nova does: Compute-A and compute-a are one member", () => {
      const nodes = uuids(7, 200);
      const mixed = novaRing(["Compute-A", "COMPUTE-b"]);
      const lower = novaRing(["compute-a", "compute-b"]);
      for (const node of nodes) expect(mixed.memberOf(node)).to.equal(lower.memberOf(node));
      expect(mixed.members).to.deep.equal(["compute-a", "compute-b"]);
    });

    it("follows tooz at the edges: an empty ring places nothing, replicas beyond the members answer them all", () => {
      expect(new ToozRing([]).memberOf(uuids(1, 1)[0]!)).to.equal(null);
      const ring = new ToozRing(["a", "b", "c"]);
      const node = uuids(2, 1)[0]!;
      expect(ring.lookup(node, { replicas: 5 }).sort()).to.deep.equal(["a", "b", "c"]);
      expect(ring.lookup(node, { ignore: ["a", "b", "c"] })).to.deep.equal([]);
      expect(ring.lookup(node, { replicas: 3, ignore: ["b"] }).sort()).to.deep.equal(["a", "c"]);
    });

    it("matches ../shared/peers/ring-vectors.json, recorded from the real tooz", function () {
      if (!existsSync(RING_VECTORS)) this.skip();
      const vectors = JSON.parse(readFileSync(RING_VECTORS, "utf8")) as {
        cases: Array<{ hosts: string[]; partitions?: number; expected: Record<string, string> }>;
      };
      let compared = 0;
      for (const c of vectors.cases) {
        const ring = new ToozRing(
          c.hosts.map((h) => h.toLowerCase()),
          c.partitions ?? 32,
        );
        for (const [node, member] of Object.entries(c.expected)) {
          expect(ring.memberOf(node), `${node} over ${c.hosts.join(",")}`).to.equal(member);
          compared++;
        }
      }
      expect(compared).to.be.greaterThan(500);
    });
  });

  describe("against the real tooz (python3-tooz)", function () {
    this.timeout(120_000);
    before(function () {
      const why = toozUnavailable();
      if (why !== null) {
        console.log(`      (${why}: live tooz comparison skipped)`);
        this.skip();
      }
    });

    const memberSets: Array<{ name: string; hosts: string[]; partitions?: number; replicas?: number }> = [
      { name: "1 host", hosts: ["compute-0"] },
      { name: "3 hosts", hosts: ["compute-0", "compute-1", "compute-2"] },
      {
        name: "10 FQDNs, mixed case",
        hosts: Array.from({ length: 10 }, (_, i) => `Ironic-${i}.Example.ORG`),
      },
      { name: "100 hosts", hosts: Array.from({ length: 100 }, (_, i) => `nc${i}`) },
      { name: "unicode hosts", hosts: ["höst-ä", "hôte-b", "主机-c"] },
      { name: "8 partitions", hosts: ["a", "b", "c", "d"], partitions: 8 },
      { name: "2 replicas", hosts: ["a", "b", "c", "d", "e"], replicas: 2 },
    ];

    it("places 5,000 random node UUIDs exactly as tooz does, over each member set", () => {
      const nodes = uuids(20261130, 5_000);
      for (const set of memberSets) {
        const expected = toozMapping({
          hosts: set.hosts,
          nodes,
          partitions: set.partitions,
          replicas: set.replicas,
        });
        const ring = new ToozRing(
          set.hosts.map((h) => h.toLowerCase()),
          set.partitions ?? 32,
        );
        const differences = nodes.filter((node) => {
          const ours = ring.lookup(node, { replicas: set.replicas ?? 1 });
          const theirs = expected[node]!;
          return (
            JSON.stringify(set.replicas === undefined ? ours[0] : ours.sort()) !== JSON.stringify(theirs)
          );
        });
        expect(
          differences,
          `${set.name}: first differences ${differences.slice(0, 3).join(", ")}`,
        ).to.have.length(0);
      }
    });

    it("`shardbridge ring` prints what tooz prints for the same input", () => {
      const nodes = uuids(99, 2000);
      const hosts = ["Compute-A", "compute-b", "compute-c"];
      const ours = ringCli(["--members", hosts.join(",")], nodes.join("\n") + "\n");
      expect(ours.status, ours.stderr).to.equal(0);
      expect(JSON.parse(ours.stdout)).to.deep.equal(toozMapping({ hosts, nodes }));
    });
  });

  describe("both rings", () => {
    const members = Array.from({ length: 10 }, (_, i) => `compute-${i}`);
    const nodes = uuids(3, 5000);

    for (const kind of ["tooz", "ketama"] as const) {
      it(`${kind}: losing one member moves only that member's nodes, and every node lands on a member`, () => {
        const before = buildRing(kind, members);
        const after = buildRing(
          kind,
          members.filter((m) => m !== "compute-3"),
        );
        let moved = 0;
        for (const node of nodes) {
          const was = before.memberOf(node)!;
          const now = after.memberOf(node)!;
          expect(members).to.include(was);
          if (was !== now) {
            expect(was, node).to.equal("compute-3");
            moved++;
          }
        }
        expect(moved).to.be.within(5000 / 10 / 3, (5000 / 10) * 3);
      });
    }

    it("ketama (the hashring package) does not place nodes as nova does", () => {
      const tooz = buildRing("tooz", members);
      const ketama = buildRing("ketama", members);
      const same = nodes.filter((n) => tooz.memberOf(n) === ketama.memberOf(n)).length;
      expect(same).to.be.lessThan(nodes.length / 2);
    });
  });

  describe("`shardbridge ring` refuses bad input, naming it", function () {
    this.timeout(30_000);
    const cases: Array<[string, string[], string, RegExp]> = [
      ["no members", ["--members", ""], "", /members: must name at least one member/],
      ["a member twice (nova lower-cases)", ["--members", "a,b,A"], "", /members\[2\]: repeats \[0\]/],
      [
        "a line that is not a UUID",
        ["--members", "a"],
        `${uuids(4, 1)[0]}\nnot-a-uuid\n`,
        /line 2: "not-a-uuid": not a node UUID/,
      ],
      [
        "an unknown ring kind",
        ["--members", "a", "--kind", "rendezvous"],
        "",
        /kind: must be tooz or ketama/,
      ],
      [
        "zero partitions",
        ["--members", "a", "--partitions", "0"],
        "",
        /--partitions: must be an integer 1\.\.1024/,
      ],
    ];
    for (const [name, args, stdin, message] of cases) {
      it(name, () => {
        const run = ringCli(args, stdin);
        // A bad flag is bad usage (2); a node list that is not one, a failed run (1).
        expect(run.status).to.equal(name === "a line that is not a UUID" ? 1 : 2);
        expect(run.stdout).to.equal("");
        expect(run.stderr).to.match(message);
      });
    }
  });
});
