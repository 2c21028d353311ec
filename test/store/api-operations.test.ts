import { expect } from "chai";
import { Writable } from "node:stream";
import winston from "winston";
import { bridgeApp } from "../helpers/app.js";
import { logger } from "../../src/runtime/log.js";
import { memoryUnderTest, useApp } from "../helpers/backends.js";
import { call, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";
import { MAX_SHARD_LABELS } from "../../src/api/http/shard-labels.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";

describe("Operations: metrics and request ids", () => {
  const ctx = useApp(memoryUnderTest(), (store) => bridgeApp(store, { authority: testAuthority() }));

  it("serves Prometheus text at /metrics without a token: leases, requests by route, nodes per shard", async () => {
    await call(
      `${ctx.base}/v1/nodes/00000000-0000-4000-8000-000000000001`,
      "PUT",
      wholeNode({ shard: "rack-a" }),
    );
    await call(`${ctx.base}/v1/nodes/00000000-0000-4000-8000-000000000002`, "PUT", wholeNode({}));
    const agent = TEST_TOKENS.agent("compute-0");
    const got = await call(`${ctx.base}/v1/shards/rack-a/lease`, "POST", { agent: "compute-0" }, agent);
    await call(
      `${ctx.base}/v1/shards/rack-a/lease`,
      "POST",
      { agent: "compute-0", token: got.body.token },
      agent,
    );
    await call(`${ctx.base}/v1/shards/rack-a/lease`, "POST", { agent: "compute-0", token: 1 }, agent);
    await call(
      `${ctx.base}/v1/shards/rack-a/lease`,
      "POST",
      { agent: "compute-1" },
      TEST_TOKENS.agent("compute-1"),
    );

    const res = await fetch(`${ctx.base}/metrics`);
    expect(res.status).to.equal(200);
    const text = await res.text();
    expect(text).to.include('shardbridge_lease_acquired_total{shard="rack-a"} 1');
    expect(text).to.include('shardbridge_lease_lost_total{shard="rack-a",reason="stale_token"} 1');
    expect(text).to.include('shardbridge_lease_refused_total{shard="rack-a",reason="held"} 1');
    expect(text).to.match(/shardbridge_lease_renew_seconds_count 2/);
    expect(text).to.include('shardbridge_nodes{shard="rack-a"} 1');
    expect(text).to.include('shardbridge_nodes{shard="None"} 1');
    expect(text).to.include(
      'shardbridge_http_requests_total{route="/v1/shards/:shard/lease",method="POST",status="409"} 2',
    );
  });

  describe("shard labels only for shards the store knows", () => {
    // Ironic is never reached here: each fenced write below is refused on its token first.
    const labelled = useApp(memoryUnderTest(), (store) =>
      bridgeApp(store, {
        authority: testAuthority(),
        catalog: new ShardCatalog([{ name: "rack-m", description: "", lease_ttl_ms: 6000 }]),
        ironicUrl: "http://127.0.0.1:9",
      }),
    );
    const metrics = async () => (await fetch(`${labelled.base}/metrics`)).text();

    it("requests naming made-up shards, without a token and with one, spend no label: real shards after them are named", async () => {
      const flood = MAX_SHARD_LABELS + 100;
      const before = await memoryUnderTest().state(labelled.store);
      // Unauthenticated: the fenced endpoint's writes, refused on their lease token.
      for (let i = 0; i < flood; i += 50)
        await Promise.all(
          Array.from({ length: 50 }, async (_, j) => {
            const res = await fetch(
              `${labelled.base}/fenced/made-up-${i + j}/lease-1-${"0".repeat(32)}/ironic/v1/nodes/00000000-0000-4000-8000-000000000001`,
              { method: "PATCH", headers: { "content-type": "application/json" }, body: "[]" },
            );
            expect(res.status).to.equal(409);
            await res.arrayBuffer();
          }),
        );
      // An agent's renews of shards that do not exist.
      const agent = TEST_TOKENS.agent("compute-0");
      for (let i = 0; i < 20; i++)
        await call(
          `${labelled.base}/v1/shards/renewed-${i}/lease`,
          "POST",
          { agent: "compute-0", token: 7 },
          agent,
        );
      expect(await memoryUnderTest().state(labelled.store), "the refusals wrote nothing").to.equal(before);

      // Then real shards: one defined, one only a node carries (known to the store at the next scrape).
      await call(
        `${labelled.base}/v1/nodes/00000000-0000-4000-8000-000000000003`,
        "PUT",
        wholeNode({ shard: "rack-n" }),
      );
      await metrics();
      for (const shard of ["rack-m", "rack-n"])
        expect(
          (await call(`${labelled.base}/v1/shards/${shard}/lease`, "POST", { agent: "compute-0" }, agent))
            .status,
        ).to.equal(200);
      const text = await metrics();
      expect(text).to.include('shardbridge_lease_acquired_total{shard="rack-m"} 1');
      expect(text).to.include('shardbridge_lease_acquired_total{shard="rack-n"} 1');
      expect(text).to.include(`shardbridge_fenced_requests_total{shard="other",outcome="refused"} ${flood}`);
      expect(text).to.include('shardbridge_lease_lost_total{shard="other",reason="expired"} 20');
      expect(text).to.not.match(/shard="(made-up|renewed)-/);
    });
  });

  it("stamps the log lines of a request with its request id: its request line, its errors", async () => {
    const lines: string[] = [];
    const transport = new winston.transports.Stream({
      stream: new Writable({
        write(chunk, _encoding, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    });
    const level = logger.level;
    // A line per request is written at debug (at info only when slow).
    logger.level = "debug";
    logger.add(transport);
    try {
      const res = await fetch(`${ctx.base}/healthz`, { headers: { "x-request-id": "rid-12345" } });
      expect(res.headers.get("x-request-id")).to.equal("rid-12345");
      // A request that fails inside the store: its error line carries its id too.
      const failing = Object.assign(
        Object.create(Object.getPrototypeOf(ctx.store.backend)),
        ctx.store.backend,
        {
          fence: () => Promise.reject(new Error("boom")),
        },
      );
      const original = ctx.store.backend;
      (ctx.store as { backend: unknown }).backend = failing;
      try {
        const answer = await fetch(`${ctx.base}/v1/shards/s1/fence`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${TEST_TOKENS.admin}`,
            "content-type": "application/json",
            "x-request-id": "rid-fails",
          },
          body: '{"token":1}',
        });
        expect(answer.status).to.equal(503);
      } finally {
        (ctx.store as { backend: unknown }).backend = original;
      }
    } finally {
      logger.remove(transport);
      logger.level = level;
    }
    const parsed = lines.map((l) => JSON.parse(l) as { message: string; request_id?: string });
    expect(parsed.find((l) => l.message === "request")?.request_id).to.equal("rid-12345");
    expect(parsed.find((l) => l.message === "store unavailable")?.request_id).to.equal("rid-fails");
  });
});
