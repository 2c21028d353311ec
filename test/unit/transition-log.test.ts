import { expect } from "chai";
import { PassThrough } from "node:stream";
import winston from "winston";
import { actsAfter, logTransition, parseTransition } from "../../src/core/keeper/transition-log.js";
import { logger } from "../../src/runtime/log.js";

/** The agent's transition lines, written through the real logger and read back by the contract. */
describe("Agent transition lines: one contract for the agent that writes and the runner that reads", () => {
  const lines: string[] = [];
  const sink = new PassThrough();
  sink.on("data", (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean)));
  const transport = new winston.transports.Stream({ stream: sink });
  const console = logger.transports.find((t) => t instanceof winston.transports.Console);

  let level = logger.level;
  before(() => {
    // The suite logs at warn (test/helpers/setup.ts); transitions are info, and the console stays quiet.
    level = logger.level;
    logger.level = "info";
    if (console !== undefined) console.silent = true;
    logger.add(transport);
  });
  after(() => {
    logger.remove(transport);
    if (console !== undefined) console.silent = false;
    logger.level = level;
  });

  it("reads back what the agent writes, with its time, agent and shard", async () => {
    const log = logger.child({ agent: "compute-1", shard: "rack-a" });
    logTransition(log, { message: "active", token: 42, ttl_ms: 6000 });
    logTransition(log, { message: "lost", token: 42, reason: "deadline", detail: "renew deadline passed" });
    logTransition(log, { message: "released", token: 43 });
    log.info("nodes", { count: 3 }); // not a transition
    await new Promise((r) => setImmediate(r));
    const parsed = lines.map(parseTransition);
    expect(parsed.map((p) => p?.message ?? null)).to.deep.equal(["active", "lost", "released", null]);
    expect(parsed[0]).to.include({ agent: "compute-1", shard: "rack-a", token: 42, ttl_ms: 6000 });
    expect(Date.parse(parsed[0]!.timestamp)).to.be.within(Date.now() - 10_000, Date.now());
    expect(parsed.slice(0, 3).map((p) => actsAfter(p!))).to.deep.equal([true, false, false]);
  });

  it("refuses a line whose message or fields drifted, instead of matching nothing silently", () => {
    const good = {
      timestamp: new Date().toISOString(),
      agent: "a",
      shard: "s",
      message: "active",
      token: 1,
      ttl_ms: 6000,
    };
    expect(parseTransition(JSON.stringify(good))).to.not.equal(null);
    expect(parseTransition(JSON.stringify({ ...good, message: "activated" }))).to.equal(null);
    expect(parseTransition(JSON.stringify({ ...good, token: "1" }))).to.equal(null);
    const { ttl_ms: _dropped, ...noTtl } = good;
    expect(parseTransition(JSON.stringify(noTtl))).to.equal(null);
    expect(parseTransition('{"message":"active"')).to.equal(null);
  });
});
