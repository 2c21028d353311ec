import { expect } from "chai";
import { connect } from "node:net";
import { bridgeApp } from "../helpers/app.js";
import { MAX_LISTED_ISSUES } from "../../src/core/validation.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { OwnershipRegistry } from "../../src/core/traits/ownership.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import {
  TEST_TOKENS,
  TEST_WEBHOOK_SECRET,
  call,
  everyThirdIn,
  postWebhook,
  testAuthority,
  wholeNode,
} from "../helpers/http.js";

const RACK_B_NODE = "0b0e1d2c-b4a5-4697-8877-665544332201";
const NAMED_NODE = "0b0e1d2c-b4a5-4697-8877-665544332202";

/** One request written on a raw socket, and the answer as it comes back (status, body, when). */
function rawRequest(
  base: string,
  head: string,
  body = "",
  waitMs = 3000,
): Promise<{ status: number; body: any; afterMs: number; closed: boolean }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(Number(port), hostname);
    let received = "";
    let answered: { status: number; body: any; afterMs: number } | null = null;
    const timer = setTimeout(() => {
      socket.destroy();
      if (answered !== null) resolve({ ...answered, closed: false });
      else reject(new Error(`no answer within ${waitMs} ms`));
    }, waitMs);
    socket.on("error", () => undefined); // the server may reset a connection it refused
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      const split = received.indexOf("\r\n\r\n");
      if (split < 0 || answered !== null) return;
      const length = Number(/content-length: (\d+)/i.exec(received.slice(0, split))?.[1] ?? -1);
      const payload = received.slice(split + 4);
      if (length >= 0 && Buffer.byteLength(payload, "latin1") < length) return;
      answered = {
        status: Number(received.slice(9, 12)),
        body: payload === "" ? null : JSON.parse(payload),
        afterMs: performance.now() - started,
      };
    });
    socket.on("close", () => {
      clearTimeout(timer);
      if (answered !== null) resolve({ ...answered, closed: true });
      else reject(new Error(`closed without an answer: ${JSON.stringify(received.slice(0, 200))}`));
    });
    socket.write(head + body);
  });
}

for (const backend of backendsUnderTest()) {
  describe(`Refused or meaningless requests write nothing: ${backend.name}`, () => {
    const catalog = new ShardCatalog([{ name: "rack-b", description: "", lease_ttl_ms: 6000 }]);
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, {
        authority: testAuthority(),
        catalog,
        inspector: { rules: [], ownership: new OwnershipRegistry(), secret: TEST_WEBHOOK_SECRET },
      }),
    );
    const as = (agent: string) => TEST_TOKENS.agent(agent);
    const acquire = async (agent: string) =>
      (await call(`${ctx.base}/v1/shards/rack-b/lease`, "POST", { agent }, as(agent))).body.token as number;
    const state = () => backend.state(ctx.store);

    beforeEach(async () => {
      await call(`${ctx.base}/v1/nodes/${RACK_B_NODE}`, "PUT", wholeNode({ name: "b-1", shard: "rack-b" }));
      await call(`${ctx.base}/v1/nodes/${NAMED_NODE}`, "PUT", wholeNode({ name: "named" }));
    });

    /** `request` is refused with `status` naming `field`, and the store is as it was. */
    const refusedUnchanged = async (
      request: () => Promise<{ status: number; body: any }>,
      status: number,
      field?: string,
    ) => {
      const before = await state();
      const answer = await request();
      expect(answer.status, JSON.stringify(answer.body)).to.equal(status);
      if (field !== undefined)
        expect(answer.body.errors.map((e: { field?: string }) => e.field)).to.include(field);
      expect(await state()).to.equal(before);
      return answer;
    };

    describe("PUT and bulk need whole nodes: no field left out moves or renames a node", () => {
      for (const [what, body, field] of [
        ["an empty body", undefined, "(body)"],
        ["an empty object", {}, "shard"],
        ["JSON null", "null", "(body)"],
        ["a list", "[]", "(body)"],
        ["a string", '"rack-c"', "(body)"],
        ["a body without shard", { name: "b-1", conductor_group: "", instance_host: null }, "shard"],
        ["a body without name", { shard: "rack-b", conductor_group: "", instance_host: null }, "name"],
      ] as const) {
        it(`PUT with ${what}: 400, the node stays in its shard with its name`, async () => {
          await refusedUnchanged(() => call(`${ctx.base}/v1/nodes/${RACK_B_NODE}`, "PUT", body), 400, field);
          const node = (await call(`${ctx.base}/v1/nodes/${RACK_B_NODE}`, "GET")).body;
          expect(node).to.include({ shard: "rack-b", name: "b-1" });
        });
      }

      it("a bulk with one node lacking its shard: 400 naming it, no node of the bulk written", async () => {
        const nodes = [
          wholeNode({ uuid: NAMED_NODE, name: "renamed", shard: "rack-b" }),
          { uuid: RACK_B_NODE, name: "b-1", conductor_group: "", instance_host: null },
        ];
        await refusedUnchanged(
          () => call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes }),
          400,
          "nodes[1].shard",
        );
      });

      it("a bulk large enough for the decode worker, its last node lacking its shard: 400 naming it, none written", async () => {
        // 3,000 nodes (~300 KB): read a chunk a turn and decoded in the worker (src/api/decode/).
        const nodes: Array<Record<string, unknown>> = everyThirdIn("rack-b", 3000);
        const { shard: _left, ...lacking } = nodes[2999]!;
        nodes[2999] = lacking;
        expect(JSON.stringify({ nodes }).length).to.be.greaterThan(128 * 1024);
        await refusedUnchanged(
          () => call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes }),
          400,
          "nodes[2999].shard",
        );
      });

      it("a bulk of 20,000 nodes each lacking its shard: 400 listing the first 50 and counting the rest, none written", async () => {
        const nodes = everyThirdIn("rack-b", 20_000).map(({ shard: _left, ...lacking }) => lacking);
        const answer = await refusedUnchanged(
          () => call(`${ctx.base}/v1/nodes/bulk`, "POST", { nodes }),
          400,
          "nodes[49].shard",
        );
        const errors = answer.body.errors as Array<{ field?: string; detail: string }>;
        expect(errors.map((e) => e.field)).to.deep.equal([
          ...Array.from({ length: MAX_LISTED_ISSUES }, (_, i) => `nodes[${i}].shard`),
          "(more)",
        ]);
        expect(errors.at(-1)!.detail).to.equal(
          `(more): ${20_000 - MAX_LISTED_ISSUES} more problems, not listed: only the first ${MAX_LISTED_ISSUES} are`,
        );
      });

      it("PATCH changes only the fields it names; an unknown node is a 404 that writes nothing", async () => {
        const moved = await call(`${ctx.base}/v1/nodes/${NAMED_NODE}`, "PATCH", { shard: "rack-b" });
        expect(moved.status).to.equal(200);
        expect(moved.body).to.deep.equal(wholeNode({ uuid: NAMED_NODE, name: "named", shard: "rack-b" }));
        const cleared = await call(`${ctx.base}/v1/nodes/${NAMED_NODE}`, "PATCH", { name: null });
        expect(cleared.body).to.include({ name: null, shard: "rack-b" });
        const unknown = "0b0e1d2c-b4a5-4697-8877-6655443322ff";
        await refusedUnchanged(
          () => call(`${ctx.base}/v1/nodes/${unknown}`, "PATCH", { shard: "rack-b" }),
          404,
        );
        await refusedUnchanged(
          () => call(`${ctx.base}/v1/nodes/${NAMED_NODE}`, "PATCH", undefined),
          400,
          "(body)",
        );
        const same = await refusedUnchanged(
          () => call(`${ctx.base}/v1/nodes/${NAMED_NODE}`, "PATCH", {}),
          200,
        );
        expect(same.body).to.include({ shard: "rack-b" });
      });
    });

    describe("the feed cursor moves only onto entries the feed delivered", () => {
      it("an ack of an id the feed never had is 409; the cursor stays and later changes still arrive", async () => {
        const token = await acquire("compute-0");
        const read = () =>
          call(`${ctx.base}/v1/shards/rack-b/feed?token=${token}`, "GET", undefined, as("compute-0"));
        const ack = (id: string) =>
          call(`${ctx.base}/v1/shards/rack-b/feed/ack`, "POST", { token, id }, as("compute-0"));
        await postWebhook(ctx.base, { kind: "deltas", node: RACK_B_NODE, deltas: ["+CUSTOM_A"] });
        const [first] = (await read()).body.entries;
        for (const id of [
          "99999999999999-0",
          `${first.id.split("-")[0]}-${Number(first.id.split("-")[1]) + 7}`,
        ]) {
          const answer = await refusedUnchanged(() => ack(id), 409, "id");
          expect(answer.body.errors[0].code).to.equal("shardbridge.feed.unknown_entry");
        }
        expect((await read()).body).to.deep.include({ cursor: null });
        expect((await ack(first.id)).body.cursor).to.equal(first.id);
        // Acknowledging it again, or an older id, moves nothing and is not an error.
        await refusedUnchanged(() => ack(first.id), 200);
        await refusedUnchanged(() => ack("0-0"), 200);
        await postWebhook(ctx.base, { kind: "deltas", node: RACK_B_NODE, deltas: ["+CUSTOM_B"] });
        expect((await read()).body.entries.map((e: { deltas: string[] }) => e.deltas)).to.deep.equal([
          ["+CUSTOM_B"],
        ]);
      });

      it("an ack id too long to be a stream id is a 400 naming it", async () => {
        const token = await acquire("compute-0");
        const id = `${"9".repeat(25)}-0`;
        await refusedUnchanged(
          () => call(`${ctx.base}/v1/shards/rack-b/feed/ack`, "POST", { token, id }, as("compute-0")),
          400,
          "id",
        );
      });
    });

    describe("an agent learns no token but its own, and fences only as itself", () => {
      it("fence with another agent's live token is answered as a made-up one: not allowed, nothing written", async () => {
        const token = await acquire("compute-0");
        const fence = (agent: string, t: number) =>
          call(`${ctx.base}/v1/shards/rack-b/fence`, "POST", { token: t }, as(agent));
        const other = await refusedUnchanged(() => fence("compute-1", token), 200);
        expect(other.body).to.deep.equal({ allowed: false });
        expect((await fence("compute-1", token + 1)).body).to.deep.equal({ allowed: false });
        expect((await fence("compute-0", token)).body).to.deep.equal({ allowed: true });
        expect((await call(`${ctx.base}/v1/shards/rack-b/fence`, "POST", { token })).body).to.deep.equal({
          allowed: true,
        });
      });

      it("reads and refusals show tokens to admin only: an old incarnation cannot adopt its successor's", async () => {
        const first = await acquire("compute-0");
        await call(
          `${ctx.base}/v1/shards/rack-b/lease`,
          "POST",
          { agent: "compute-0", token: first },
          as("compute-0"),
        );
        const second = await acquire("compute-0"); // a restarted process of the same agent id
        expect(second).to.be.greaterThan(first);
        const renew = await call(
          `${ctx.base}/v1/shards/rack-b/lease`,
          "POST",
          { agent: "compute-0", token: first },
          as("compute-0"),
        );
        expect(renew.status).to.equal(409);
        expect(renew.body.errors[0]).to.deep.include({ code: "shardbridge.lease.stale_token" });
        expect(renew.body.errors[0].lease).to.include({ holder: "compute-0", token: null });
        const asAgent = (await call(`${ctx.base}/v1/shards/rack-b/lease`, "GET", undefined, as("compute-0")))
          .body;
        expect(asAgent).to.deep.include({ last_token: null });
        expect(asAgent.lease).to.include({ holder: "compute-0", token: null });
        const shards = (await call(`${ctx.base}/v1/shards`, "GET", undefined, as("compute-1"))).body.shards;
        expect(shards.find((s: { name: string }) => s.name === "rack-b").lease.token).to.equal(null);
        const asAdmin = (await call(`${ctx.base}/v1/shards/rack-b/lease`, "GET")).body;
        expect(asAdmin).to.deep.include({ last_token: second });
        expect(asAdmin.lease).to.include({ token: second });
      });
    });

    it("a heartbeat without shards is 400: the agent does not drop into nova's ring pool", async () => {
      const beat = (body: unknown) =>
        call(`${ctx.base}/v1/agents/compute-0/heartbeat`, "POST", body, as("compute-0"));
      expect((await beat({ shards: ["rack-b"] })).status).to.equal(200);
      await refusedUnchanged(() => beat(undefined), 400, "(body)");
      await refusedUnchanged(() => beat({}), 400, "shards");
      await refusedUnchanged(() => beat({ shards: "rack-b" }), 400, "shards");
      const agent = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents[0];
      expect(agent).to.include({ id: "compute-0", legacy_pool: false });
      expect(agent.serves).to.deep.equal(["rack-b"]);
    });

    it("a heartbeat body near its limit that names no shards is 400 in one error and changes nothing", async () => {
      const beat = (body: unknown) =>
        call(`${ctx.base}/v1/agents/compute-0/heartbeat`, "POST", body, as("compute-0"));
      expect((await beat({ shards: ["rack-b"] })).status).to.equal(200);
      // Each under the 512 KiB limit, each one refusal; those over 32 KiB are decoded in the worker.
      const near = 250_000;
      const bodies: Array<[string, string, string]> = [
        [
          "250,000 numbers",
          `{"shards":[${Array(near).fill("0").join(",")}]}`,
          "must name at most 1000 shards",
        ],
        [
          "1,001 names",
          JSON.stringify({ shards: Array(1001).fill("rack-b") }),
          "must name at most 1000 shards",
        ],
        [
          "brackets nested 250,000 deep",
          `{"shards":${"[".repeat(near)}${"]".repeat(near)}}`,
          "shards[0]: must be a string",
        ],
        [
          "a bad name",
          JSON.stringify({ shards: ["rack-b", "bad name"] }),
          "must match ^[a-zA-Z0-9_.-]{1,255}$",
        ],
      ];
      for (const [what, body, reason] of bodies) {
        const answer = await refusedUnchanged(() => beat(body), 400);
        const [only, ...rest] = answer.body.errors as Array<{ field: string; detail: string }>;
        expect(rest, what).to.deep.equal([]);
        expect(only!.field, what).to.match(/^shards/);
        expect(only!.detail, what).to.include(reason);
      }
      const agent = (await call(`${ctx.base}/v1/agents`, "GET")).body.agents[0];
      expect(agent.serves).to.deep.equal(["rack-b"]);
    });

    it("a body declared as anything but JSON (or curl -d's form type) is 415 on every route, unread and unwritten", async () => {
      const sent = (path: string, method: string, body: unknown, type: string, token = TEST_TOKENS.admin) =>
        fetch(`${ctx.base}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, "content-type": type },
          body: JSON.stringify(body),
        }).then(async (res) => ({ status: res.status, body: JSON.parse(await res.text()) }));
      const writes: Array<[string, string, unknown, string]> = [
        ["/v1/shards/rack-b/lease", "POST", { agent: "compute-0" }, as("compute-0")],
        [`/v1/nodes/${NAMED_NODE}`, "PUT", wholeNode({ shard: "rack-b" }), TEST_TOKENS.admin],
        [
          "/v1/nodes/bulk",
          "POST",
          { nodes: [wholeNode({ uuid: NAMED_NODE, shard: "rack-b" })] },
          TEST_TOKENS.admin,
        ],
        ["/v1/agents/compute-0/heartbeat", "POST", { shards: ["rack-b"] }, as("compute-0")],
        [
          "/v1/inspector/webhook",
          "POST",
          { kind: "deltas", node: RACK_B_NODE, deltas: ["+CUSTOM_X"] },
          TEST_TOKENS.inspector,
        ],
      ];
      for (const [path, method, body, token] of writes)
        for (const type of ["text/plain", "multipart/form-data; boundary=x", "application/xml"]) {
          const answer = await refusedUnchanged(() => sent(path, method, body, type, token), 415);
          expect(answer.body.errors[0], `${method} ${path} as ${type}`).to.include({
            code: "shardbridge.body.invalid",
            detail: `content type ${JSON.stringify(type.split(";")[0])} is not JSON: send application/json`,
          });
        }
      // What curl -d sends unless told otherwise, and JSON's own suffix: read as JSON.
      const granted = await sent(
        ...(writes[0]!.slice(0, 3) as [string, string, unknown]),
        "application/x-www-form-urlencoded",
        as("compute-0"),
      );
      expect(granted.status).to.equal(200);
      const node = await sent(
        writes[1]![0],
        "PUT",
        writes[1]![2],
        "application/merge-patch+json; charset=utf-8",
      );
      expect(node.status).to.be.oneOf([200, 201]);
    });

    it("a lease call with a missing body is 400 naming (body), not a default", async () => {
      for (const method of ["POST", "DELETE"])
        await refusedUnchanged(
          () => call(`${ctx.base}/v1/shards/rack-b/lease`, method, undefined, as("compute-0")),
          400,
          "(body)",
        );
      await refusedUnchanged(() => call(`${ctx.base}/v1/shards/rack-b/fence`, "POST", "[1]"), 400, "(body)");
    });

    describe("inspection orders that cannot be meant are refused, not remembered", () => {
      const data = { inventory: {} };
      it("a finish time in the future", async () => {
        const finished_at = new Date(Date.now() + 3600_000).toISOString();
        await refusedUnchanged(
          () => postWebhook(ctx.base, { kind: "inspection", node: RACK_B_NODE, finished_at, data }),
          400,
          "finished_at",
        );
      });
      it("a finish time and a sequence at once", async () => {
        const finished_at = new Date().toISOString();
        await refusedUnchanged(
          () =>
            postWebhook(ctx.base, { kind: "inspection", node: RACK_B_NODE, finished_at, sequence: 5, data }),
          400,
          "sequence",
        );
      });
    });

    describe("signed deliveries the webhook refuses are remembered by nothing", () => {
      it("stale, a trait another owns, a change at odds with itself, an unknown node: with an id or without, nothing written, judged again when sent again", async () => {
        // An order applied first (remembered: it was applied), so that an older one is stale.
        const applied = await postWebhook(
          ctx.base,
          { kind: "deltas", node: RACK_B_NODE, sequence: 5, deltas: ["+CUSTOM_APPLIED"] },
          { delivery: "d-applied" },
        );
        expect(applied.status, JSON.stringify(applied.body)).to.equal(200);
        const refusals: Array<[number, string, object]> = [
          [409, "traits.stale", { kind: "deltas", node: RACK_B_NODE, sequence: 3, deltas: ["+CUSTOM_OLD"] }],
          [422, "traits.not_owned", { kind: "deltas", node: RACK_B_NODE, deltas: ["-COMPUTE_NODE"] }],
          [422, "traits.refused", { kind: "deltas", node: RACK_B_NODE, deltas: ["+CUSTOM_X", "-CUSTOM_X"] }],
          [
            404,
            "node.not_found",
            { kind: "deltas", node: "0b0e1d2c-b4a5-4697-8877-6655443322ff", deltas: ["+CUSTOM_X"] },
          ],
        ];
        for (const [status, code, payload] of refusals)
          for (const options of [{ delivery: `d-${code}` }, {}]) {
            const what = `${code} ${options.delivery ?? "(no id: remembered by signature)"}`;
            const first = await refusedUnchanged(() => postWebhook(ctx.base, payload, options), status);
            expect(first.body.errors[0].code, what).to.equal(`shardbridge.${code}`);
            // The very same request again: refused again as itself, not as a replay.
            const again = await refusedUnchanged(() => postWebhook(ctx.base, payload, options), status);
            expect(again, what).to.deep.include({ replay: false });
          }
      });
    });

    describe("bodies over the limit are refused on their header, never read", () => {
      const head = (path: string, extra: string) =>
        `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKENS.admin}\r\n` +
        `Content-Type: application/json\r\n${extra}\r\n`;
      for (const path of ["/v1/shards/rack-b/fence", "/v1/nodes/bulk", "/v1/inspector/webhook"]) {
        it(`a declared 10 GiB body on ${path}: 413 at once, the connection closed`, async () => {
          const before = await state();
          const token = path.includes("webhook") ? TEST_TOKENS.inspector : TEST_TOKENS.admin;
          const answer = await rawRequest(
            ctx.base,
            head(path, "Content-Length: 10737418240\r\n").replace(TEST_TOKENS.admin, token),
            '{"token":',
          );
          expect(answer.status).to.equal(413);
          expect(answer.body.errors[0].code).to.equal("shardbridge.body.too_large");
          expect(answer.afterMs).to.be.below(2000);
          expect(answer.closed).to.equal(true);
          expect(await state()).to.equal(before);
        });
      }

      for (const path of ["/v1/shards/rack-b/fence", "/v1/inspector/webhook"]) {
        it(`a caller without a valid token on ${path}: 401 before its body has arrived, the connection closed`, async () => {
          const before = await state();
          const answer = await rawRequest(
            ctx.base,
            head(path, "Content-Length: 60000\r\n").replace(TEST_TOKENS.admin, "not-a-token-of-this-bridge"),
            '{"token":',
          );
          expect(answer.status).to.equal(401);
          expect(answer.afterMs).to.be.below(2000);
          expect(answer.closed).to.equal(true);
          expect(await state()).to.equal(before);
        });
      }

      it("a chunked body is refused as soon as it passes the limit, before it ends", async () => {
        const chunk = "x".repeat(64 * 1024);
        // 1.1 MiB of chunks, and no final chunk: the body never ends.
        const body = Array.from({ length: 18 }, () => `${(64 * 1024).toString(16)}\r\n${chunk}\r\n`).join("");
        const answer = await rawRequest(
          ctx.base,
          head("/v1/shards/rack-b/fence", "Transfer-Encoding: chunked\r\n"),
          body,
        );
        expect(answer.status).to.equal(413);
        expect(answer.closed).to.equal(true);
      });
    });

    describe("errors Node raises below express come in the API-SIG shape", () => {
      const cases: Array<[string, string, number, string]> = [
        [
          "a bare CR in a header",
          "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n",
          400,
          "shardbridge.request.malformed",
        ],
        [
          "Content-Length with Transfer-Encoding",
          "POST /v1/shards/rack-b/fence HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
          400,
          "shardbridge.request.malformed",
        ],
        [
          "a 40 KiB header",
          `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(40 * 1024)}\r\n\r\n`,
          431,
          "shardbridge.request.headers_too_large",
        ],
      ];
      for (const [what, request, status, code] of cases) {
        it(what, async () => {
          const answer = await rawRequest(ctx.base, request);
          expect(answer.status).to.equal(status);
          expect(answer.body.errors[0]).to.include({ status, code });
        });
      }
    });

    it("Expect: 100-continue invites the body only from a known token: others get their 401 without sending it", async () => {
      const head = (path: string, token: string) =>
        `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        "Content-Type: application/json\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n";
      /** The first status line the bridge sends back, the body withheld. */
      const firstAnswer = (path: string, token: string) =>
        new Promise<string>((resolve, reject) => {
          const { hostname, port } = new URL(ctx.base);
          const socket = connect(Number(port), hostname);
          socket.on("error", reject);
          socket.once("data", (chunk) => {
            socket.destroy();
            resolve(chunk.toString("latin1").split("\r\n")[0]!);
          });
          socket.write(head(path, token));
        });
      for (const path of ["/v1/nodes/bulk", "/v1/shards/rack-b/lease", "/v1/inspector/webhook"]) {
        const stranger = await rawRequest(ctx.base, head(path, "not-a-token-of-this-bridge"));
        expect(stranger.status, path).to.equal(401);
        expect(stranger.body.errors[0].code).to.equal("shardbridge.auth.unauthenticated");
        // A caller the bridge knows is asked for its body first, as HTTP/1.1 says.
        expect(await firstAnswer(path, TEST_TOKENS.admin), path).to.equal("HTTP/1.1 100 Continue");
      }
    });

    it("replaces an X-Request-Id that is not a sane token with its own", async () => {
      const echoed = async (id: string) =>
        (await fetch(`${ctx.base}/healthz`, { headers: { "x-request-id": id } })).headers.get("x-request-id");
      expect(await echoed("req-42")).to.equal("req-42");
      expect(await echoed("x".repeat(500))).to.match(/^[0-9a-f-]{36}$/);
      expect(await echoed("a b")).to.match(/^[0-9a-f-]{36}$/);
    });
  });
}
