import { expect } from "chai";
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import express from "express";
import type { AddressInfo } from "node:net";
import { authenticate, TokenAuthority } from "../../src/api/http/auth.js";
import { bridgeApp } from "../helpers/app.js";
import { IronicQueueDelivery } from "../../src/bridge/ironic/delivery.js";
import { openApiDocument } from "../../src/api/openapi/document.js";
import { rolesOf } from "../../src/api/openapi/operations.js";
import { DeclaredRoutes } from "../../src/api/http/declared-routes.js";
import { errorHandler } from "../../src/api/http/errors.js";
import { MAX_PAGES_PER_SESSION, MAX_VIEWERS, SESSION_COOKIE, STATIC_TYPES } from "../../src/api/ui/routes.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { backendsUnderTest, memoryUnderTest, useApp } from "../helpers/backends.js";
import { exampleInspector } from "../helpers/examples.js";
import { listen, postWebhook, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";
import { createIronicNode, useIronicPeer } from "../helpers/ironic-peer.js";
import { apiContract, checkedStart, checkedText } from "../helpers/openapi.js";
import { freePort } from "../helpers/redis-server.js";

const document = openApiDocument() as any;

interface Documented {
  method: string;
  path: string;
  operation: any;
}
const OPERATIONS: Documented[] = Object.entries(document.paths as Record<string, any>).flatMap(
  ([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })),
);
const isFenced = (op: Documented) => op.path.startsWith("/fenced/");

/**
 * The answers every operation must have been seen giving: its successes and redirects
 * (Ironic's, for the fenced endpoint: `default`) and its main refusals. 413, 415, 500,
 * 502 and 503 are documented for many and exercised here for some (and 503 by
 * api-store-outage).
 */
const MAIN = /^(2\d\d|3\d\d|default|400|401|403|404|409|422)$/;

function unseen(ops: Documented[]): string[] {
  const { seen } = apiContract();
  return ops.flatMap(({ method, path, operation }) =>
    Object.keys(operation.responses)
      .filter((status) => MAIN.test(status))
      .map((status) => `${method} ${path} ${status}`)
      .filter((answer) => !seen.has(answer)),
  );
}

/** At most the shared Redis's age (helpers/backends.ts), so no lease waits out a recovery. */
const TTL_MS = 10_000;
const NODE = "8f6c2a38-0d4e-4a51-9a53-2c1f5f1d7e01";
const OTHER = "8f6c2a38-0d4e-4a51-9a53-2c1f5f1d7e02";
const ROLE_TOKENS = {
  admin: TEST_TOKENS.admin,
  inspector: TEST_TOKENS.inspector,
  agent: TEST_TOKENS.agent("compute-0"),
  viewer: TEST_TOKENS.viewer,
} as const;

/** A path template with its parameters filled: `values` first, else the document's examples. */
function fill(path: string, values: Record<string, string | number> = {}): string {
  const examples = Object.values(document.components.parameters as Record<string, any>);
  return path.replace(/\{([^}]+)\}/g, (_, name: string) =>
    String(values[name] ?? examples.find((p) => p.name === name)!.example),
  );
}

/** A request whose answer is checked against the document (helpers/openapi.ts). */
async function send(
  base: string,
  method: string,
  path: string,
  options: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; text: string; headers: Headers }> {
  const headers: Record<string, string> = { ...options.headers };
  const token = options.token === undefined ? TEST_TOKENS.admin : options.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  // A redirect is an answer of its own (the status page's 303s), checked as it comes.
  const init: RequestInit = { method, headers, redirect: "manual" };
  if (options.body !== undefined) {
    headers["content-type"] ??= "application/json";
    init.body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
  }
  const url = `${base}${path}`;
  const res = await fetch(url, init);
  const text = await checkedText(method, url, res);
  const json = res.headers.get("content-type")?.startsWith("application/json") === true && text !== "";
  return { status: res.status, body: json ? JSON.parse(text) : null, text, headers: res.headers };
}

/** A body each operation that takes one would accept, so a refusal is about what the test varies. */
const BODIES: Record<string, unknown> = {
  "POST /v1/shards/{shard}/lease": { agent: "compute-0" },
  "DELETE /v1/shards/{shard}/lease": { agent: "compute-0", token: 1 },
  "POST /v1/shards/{shard}/fence": { token: 1 },
  "PUT /v1/nodes/{uuid}": wholeNode({}),
  "PATCH /v1/nodes/{uuid}": {},
  "POST /v1/agents/{id}/heartbeat": { shards: [] },
  "POST /v1/shards/{shard}/feed/ack": { token: 1, id: "1-0" },
  "PUT /v1/shard-definitions/{shard}": {},
};
/** A path parameter's value that breaks its rule. */
const BAD_PARAMETER: Record<string, string> = {
  shard: "bad%20name",
  uuid: "not-a-uuid",
  id: "%01",
  file: "..%2Fpage.css",
};

/** 401 without a credential, 403 for each role the operation does not take. */
async function refusesWhoMayNot(base: string, ops: Documented[]): Promise<void> {
  for (const op of ops) {
    // (the login form's 401 is about the token in the form: the page test has it)
    if (op.operation.security.length === 0 || op.operation.responses["401"] === undefined) continue;
    const path = fill(op.path);
    const anonymous = await send(base, op.method, path, { token: null });
    expect(anonymous.status, `${op.method} ${op.path} without a token`).to.equal(401);
    expect(anonymous.body.errors[0].code).to.equal("shardbridge.auth.unauthenticated");
    const roles: string[] | undefined = op.operation.security[0]?.bearer;
    // With a body the operation would take: the role alone is what is refused.
    const body = BODIES[`${op.method} ${op.path}`];
    for (const [role, token] of Object.entries(ROLE_TOKENS)) {
      if (roles === undefined || roles.includes(role)) continue;
      const refused = await send(base, op.method, path, { token, ...(body !== undefined && { body }) });
      expect(refused.status, `${op.method} ${op.path} as ${role}`).to.equal(403);
      expect(refused.body.errors[0].code).to.equal("shardbridge.auth.forbidden");
    }
  }
}

/**
 * A viewer gets past the role checks of every operation whose security lists it: no 401,
 * no 403 (a 404 for an example node nobody stored is an answer about the node).
 */
async function viewerReads(base: string, ops: Documented[]): Promise<string[]> {
  const read: string[] = [];
  for (const op of ops) {
    const roles: string[] | undefined = op.operation.security[0]?.bearer;
    if (roles?.includes("viewer") !== true) continue;
    const answer = await send(base, op.method, fill(op.path), { token: TEST_TOKENS.viewer });
    expect(answer.status, `${op.method} ${op.path} as a viewer: ${answer.text}`).to.be.oneOf([200, 404]);
    read.push(`${op.method} ${op.path}`);
  }
  return read;
}

/** 400 naming the parameter, for each operation's first path parameter broken. */
async function refusesBadParameters(base: string, ops: Documented[]): Promise<void> {
  for (const op of ops) {
    const name = /\{([^}]+)\}/.exec(op.path)?.[1];
    if (name === undefined) continue;
    const value = BAD_PARAMETER[name];
    if (value === undefined)
      throw new Error(`no bad value for the parameter ${name}: add one to BAD_PARAMETER`);
    const body = BODIES[`${op.method} ${op.path}`];
    const bad = await send(base, op.method, fill(op.path, { [name]: value }), {
      ...(body !== undefined && { body }),
    });
    expect(bad.status, `${op.method} ${op.path} with a bad ${name}`).to.equal(400);
    expect(bad.body.errors.map((e: { field?: string }) => e.field)).to.include(name);
  }
}

describe("OpenAPI document", function () {
  this.timeout(60_000);

  it("names no error code docs/API.md's table leaves out, nor the table one it does not answer, each under its status", () => {
    const answered = new Map<string, Set<string>>();
    for (const operations of Object.values(document.paths ?? {}))
      for (const operation of Object.values(operations as Record<string, { responses?: object }>))
        for (const [status, answer] of Object.entries(operation.responses ?? {}))
          for (const code of JSON.stringify(answer).match(/shardbridge(?:\.[a-z_]+)+/g) ?? [])
            answered.set(code, new Set([...(answered.get(code) ?? []), status]));
    const table = readFileSync(new URL("../../docs/API.md", import.meta.url), "utf8").matchAll(
      /^\| (\d{3}) +\| `(shardbridge\.[a-z_.]+)` +\|/gm,
    );
    const rows = new Map([...table].map(([, status, code]) => [code!, status!]));
    expect(
      [...answered.keys()].filter((code) => !rows.has(code)).sort(),
      "missing from the table",
    ).to.deep.equal([]);
    for (const [code, status] of rows) {
      // Node's own refusals (a malformed request, headers too large) come before any operation.
      if (code.startsWith("shardbridge.request.")) continue;
      expect([...(answered.get(code) ?? [])], `${code} in the table`).to.include(status);
    }
  });

  it("is a valid OpenAPI 3.1 document, and every schema in it compiles as strict JSON Schema 2020-12", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    expect(result.errors ?? [], JSON.stringify(result.errors)).to.deep.equal([]);
    expect(result.valid).to.equal(true);
    expect(validator.version).to.equal("3.1");
    const contract = apiContract();
    for (const name of Object.keys(document.components.schemas))
      expect(() => contract.validator(`/components/schemas/${name}`), name).not.to.throw();
    expect(contract.answerSchemas().length).to.be.greaterThan(100);
  });

  it("derives the request schemas from the routes' zod schemas", () => {
    const { NodeInput, LeaseAcquireOrRenew, Heartbeat, FeedAck } = document.components.schemas;
    // What validation refuses, the document says: a whole node's every field required…
    expect(NodeInput.required).to.deep.equal(["name", "shard", "conductor_group", "instance_host"]);
    expect(NodeInput.additionalProperties).to.equal(false);
    expect(NodeInput.properties.shard.anyOf[0].pattern).to.equal("^[a-zA-Z0-9_.-]{1,255}$");
    // …the lease body's own fields only, a heartbeat's shards required and named by the rule.
    expect(Object.keys(LeaseAcquireOrRenew.properties)).to.deep.equal(["agent", "token", "wait_ms"]);
    expect(LeaseAcquireOrRenew.properties.wait_ms).to.include({
      type: "integer",
      minimum: 0,
      maximum: 30_000,
    });
    expect(LeaseAcquireOrRenew.required).to.deep.equal(["agent"]);
    expect(Heartbeat.required).to.deep.equal(["shards"]);
    expect(Heartbeat.properties.shards.maxItems).to.equal(1000);
    expect(FeedAck.properties.id.pattern).to.equal("^\\d{1,15}-\\d{1,15}$");
  });

  it("names the roles of each operation in its security requirement and its description", () => {
    const roles = (method: string, path: string) => document.paths[path][method].security;
    expect(roles("post", "/v1/nodes/bulk")).to.deep.equal([{ bearer: ["admin"] }]);
    expect(roles("post", "/v1/shards/{shard}/lease")).to.deep.equal([{ bearer: ["agent", "admin"] }]);
    expect(roles("post", "/v1/inspector/webhook")).to.deep.equal([
      { bearer: ["inspector"], webhookSignature: [], webhookTimestamp: [] },
    ]);
    expect(roles("get", "/v1/shards")).to.deep.equal([{ bearer: ["admin", "agent", "inspector", "viewer"] }]);
    // an agent's own reads and the lease writes are not a viewer's
    expect(roles("get", "/v1/agents/{id}/nodes")).to.deep.equal([{ bearer: ["agent", "admin"] }]);
    expect(roles("get", "/v1/shards/{shard}/feed")).to.deep.equal([{ bearer: ["agent", "admin"] }]);
    // the page: its session cookie, named as the code names it, for the roles the page is for
    expect(document.components.securitySchemes.pageSession).to.include({
      type: "apiKey",
      in: "cookie",
      name: SESSION_COOKIE,
    });
    expect(roles("get", "/ui/events")).to.deep.equal([{ pageSession: ["viewer", "admin"] }]);
    expect(roles("get", "/ui")).to.deep.equal([{ pageSession: ["viewer", "admin"] }, {}]);
    expect(roles("post", "/ui/login")).to.deep.equal([]);
    expect(Object.keys(document.paths["/ui/login"].post.requestBody.content)).to.deep.equal([
      "application/x-www-form-urlencoded",
    ]);
    expect(document.paths["/ui/login"].post.requestBody.description).to.equal("At most 4 KiB.");
    expect(roles("get", "/healthz")).to.deep.equal([]);
    expect(roles("get", "/openapi.json")).to.deep.equal([]);
    expect(document.paths["/v1/shards/{shard}/lease"].post.description).to.match(
      /Roles: `agent` \(as itself\), `admin`/,
    );
  });

  it("gives the routes' role checks the roles the table declares, and none for an operation without a token", () => {
    expect(rolesOf("deleteNode")).to.deep.equal(["admin"]);
    expect(rolesOf("inspectorWebhook")).to.deep.equal(["inspector"]);
    expect(rolesOf("acquireOrRenewLease")).to.deep.equal(
      document.paths["/v1/shards/{shard}/lease"].post.security[0].bearer,
    );
    expect(() => rolesOf("health")).to.throw(/no operation health/);
    expect(() => rolesOf("noSuchOperation")).to.throw(/no operation noSuchOperation/);
  });

  it("lists exactly the routes the app mounts: none undocumented, none it does not serve", async () => {
    const store = await memoryUnderTest().fresh();
    const app = bridgeApp(store, {
      authority: testAuthority(),
      inspector: exampleInspector(),
      ironicUrl: "http://127.0.0.1:9",
    });
    const mounted = new Set(app.routes.map((r) => `${r.method} ${r.path}`));
    const documented = new Set(OPERATIONS.map((o) => `${o.method} ${o.path}`));
    expect(
      [...mounted].filter((r) => !documented.has(r)),
      "served but not in the document: list each in src/api/openapi/operations.ts",
    ).to.deep.equal([]);
    expect(
      [...documented].filter((r) => !mounted.has(r)),
      "in the document but not served: take each out of src/api/openapi/operations.ts",
    ).to.deep.equal([]);
    expect(mounted.size).to.equal(app.routes.length); // no route mounted twice
    // Without --ironic the fenced endpoint is not mounted: the app says so too.
    const plain = bridgeApp(store, { authority: testAuthority() });
    expect(plain.routes.some((r) => r.path.startsWith("/fenced/"))).to.equal(false);
  });

  it("serves a declared route at its method and path, after its role check and within its body limit", async () => {
    const received: unknown[] = [];
    const routes = new DeclaredRoutes().serve(
      {
        method: "post",
        path: "/v1/things/{thing}/parts/{part}",
        id: "postPart",
        tag: "test",
        summary: "a test route",
        access: { kind: "bearer", roles: ["admin"] },
        answers: { 200: { description: "done" } },
        bodyPolicy: { limit: 32, parseHere: true },
      },
      (req, res) => {
        received.push({ params: req.params, body: req.body as unknown });
        res.json({ ok: true });
      },
    );
    expect(routes.routes).to.deep.equal([{ method: "POST", path: "/v1/things/{thing}/parts/{part}" }]);
    const app = express();
    app.use(authenticate(testAuthority()));
    app.use(routes.router);
    app.use(errorHandler(() => undefined));
    const server = app.listen(0, "127.0.0.1");
    await new Promise((resolve) => server.once("listening", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/things/t1/parts/p2`;
    const post = (token: string, body: string) =>
      fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body,
      });
    try {
      expect((await post(TEST_TOKENS.admin, '{"a":1}')).status).to.equal(200);
      expect((await post(TEST_TOKENS.viewer, '{"a":2}')).status).to.equal(403); // the declared role
      expect((await post(TEST_TOKENS.admin, JSON.stringify({ a: "x".repeat(40) }))).status).to.equal(413);
      expect(received).to.deep.equal([{ params: { thing: "t1", part: "p2" }, body: { a: 1 } }]);
    } finally {
      server.close();
    }
  });

  it("the contract check refuses an answer the document does not describe", () => {
    const contract = apiContract();
    const headers = new Headers({ "x-request-id": "r-1", "content-type": "application/json; charset=utf-8" });
    const listed = { method: "GET", url: "/v1/shards", status: 200, headers, text: '{"shards":[]}' };
    expect(() => contract.check(listed)).not.to.throw();
    expect(() => contract.check({ ...listed, status: 202 })).to.throw(/status 202 is not documented/);
    expect(() => contract.check({ ...listed, text: '{"shards":[{"name":"a"}]}' })).to.throw(/does not match/);
    expect(() => contract.check({ ...listed, text: '{"shards":[],"more":1}' })).to.throw(/does not match/);
    expect(() =>
      contract.check({ ...listed, headers: new Headers({ "content-type": "application/json" }) }),
    ).to.throw(/X-Request-Id/);
    const refusal = (status: number, error: object) => ({
      method: "GET",
      url: `/v1/shards/rack-a`,
      status,
      headers,
      text: JSON.stringify({ errors: [{ status, title: "t", detail: "d", ...error }] }),
    });
    expect(() => contract.check(refusal(404, { code: "shardbridge.shard.not_found" }))).not.to.throw();
    // a code the operation does not list, a status unlike the answer's, a validation error without its field
    expect(() => contract.check(refusal(404, { code: "shardbridge.node.not_found" }))).to.throw(
      /does not match/,
    );
    expect(() =>
      contract.check({ ...refusal(404, { code: "shardbridge.shard.not_found" }), status: 400 }),
    ).to.throw(/does not match/);
    expect(() => contract.check(refusal(400, { code: "shardbridge.validation" }))).to.throw(/field/);
    // served where the document has no operation
    expect(() => contract.check({ ...listed, url: "/v1/shards/rack-a/nothing" })).to.throw();
    // a 401 without its challenge
    expect(() =>
      contract.check({ ...refusal(401, { code: "shardbridge.auth.unauthenticated" }), url: "/v1/shards" }),
    ).to.throw(/WWW-Authenticate/);

    // The page's answers: a redirect's Location and cookie, its security headers, HTML refusals.
    const csp = document.components.headers.ContentSecurityPolicy.schema.const as string;
    const pageHeaders = (more: Record<string, string>) =>
      new Headers({ "x-request-id": "r-2", "content-security-policy": csp, ...more });
    const cookie = `${SESSION_COOKIE}=abc.1700000000.def; Path=/ui; Max-Age=43200; HttpOnly; SameSite=Strict`;
    const loggedIn = {
      method: "POST",
      url: "/ui/login",
      status: 303,
      headers: pageHeaders({ location: "/ui", "set-cookie": cookie }),
      text: "",
    };
    expect(() => contract.check(loggedIn)).not.to.throw();
    expect(() =>
      contract.check({ ...loggedIn, headers: pageHeaders({ location: "/ui/login", "set-cookie": cookie }) }),
    ).to.throw(/Location does not match/);
    expect(() =>
      contract.check({
        ...loggedIn,
        headers: pageHeaders({ location: "/ui", "set-cookie": cookie.replace("HttpOnly; ", "") }),
      }),
    ).to.throw(/Set-Cookie does not match/);
    expect(() => contract.check({ ...loggedIn, headers: pageHeaders({ "set-cookie": cookie }) })).to.throw(
      /Location, documented as always sent, is missing/,
    );
    expect(() => contract.check({ ...loggedIn, text: "See Other. Redirecting to /ui" })).to.throw(
      /without a body/,
    );
    const formAgain = {
      method: "POST",
      url: "/ui/login",
      status: 401,
      headers: pageHeaders({ "content-type": "text/html; charset=utf-8" }),
      text: "<!doctype html><form></form>",
    };
    expect(() => contract.check(formAgain)).not.to.throw();
    expect(() =>
      contract.check({
        ...formAgain,
        headers: new Headers({ "x-request-id": "r-3", "content-type": "text/html" }),
      }),
    ).to.throw(/Content-Security-Policy/);
    // the login's 401 is the form, not the API's JSON refusal
    expect(() =>
      contract.check({
        ...formAgain,
        headers: pageHeaders({ "content-type": "application/json" }),
        text: JSON.stringify({
          errors: [{ status: 401, code: "shardbridge.auth.unauthenticated", title: "t", detail: "d" }],
        }),
      }),
    ).to.throw(/content type application\/json is not documented/);
  });
});

for (const backend of backendsUnderTest()) {
  describe(`OpenAPI contract: every operation answers as documented: ${backend.name}`, function () {
    this.timeout(120_000);
    const catalog = new ShardCatalog([
      { name: "rack-a", description: "the contract's shard", lease_ttl_ms: TTL_MS },
      { name: "rack-b", description: "compute-0's only", lease_ttl_ms: TTL_MS, agents: ["compute-0"] },
    ]);
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, { authority: testAuthority(), catalog, inspector: exampleInspector() }),
    );
    const ops = OPERATIONS.filter((op) => !isFenced(op));
    const as = (agent: string) => TEST_TOKENS.agent(agent);
    const acquire = async (shard: string, agent: string) => {
      const got = await send(ctx.base, "POST", `/v1/shards/${shard}/lease`, {
        token: as(agent),
        body: { agent },
      });
      expect(got.status).to.equal(200);
      return got.body.token as number;
    };
    const expectStatus = (answer: { status: number; text: string }, status: number) =>
      expect(answer.status, answer.text).to.equal(status);

    // The answers this suite receives, on its own (other suites' calls are checked too, not counted here).
    before(() => apiContract().seen.clear());

    it("health, readiness, metrics and this document, without a token", async () => {
      expectStatus(await send(ctx.base, "GET", "/healthz", { token: null }), 200);
      expectStatus(await send(ctx.base, "GET", "/readyz", { token: null }), 200);
      const metrics = await send(ctx.base, "GET", "/metrics", { token: null });
      expectStatus(metrics, 200);
      expect(metrics.text).to.match(/^shardbridge_http_requests_total/m);
      const served = await send(ctx.base, "GET", "/openapi.json", { token: null });
      expectStatus(served, 200);
      expect(served.body).to.deep.equal(document);
    });

    it("401 without a token and 403 for each role an operation does not take, writing nothing", async () => {
      const before = await backend.state(ctx.store);
      await refusesWhoMayNot(ctx.base, ops);
      expect(await backend.state(ctx.store)).to.equal(before);
    });

    it("a viewer reads what the document gives it, and only with GET", async () => {
      const read = await viewerReads(ctx.base, ops);
      expect(read).to.have.length.greaterThan(0);
      expect(read).to.include.members(["GET /v1/shards", "GET /v1/agents", "GET /v1/ironic/delivery"]);
      expect(read.every((op) => op.startsWith("GET "))).to.equal(true);
      // An agent's own reads are not a viewer's: its node list acts as the agent.
      expect(read).not.to.include("GET /v1/agents/{id}/nodes");
      expect(read).not.to.include("GET /v1/shards/{shard}/feed");
    });

    it("400 naming the path parameter that breaks its rule", async () => {
      await refusesBadParameters(ctx.base, ops);
    });

    it("leases: acquire, renew, fence, read, release, and their refusals", async () => {
      const token = await acquire("rack-a", "compute-0");
      const renewed = await send(ctx.base, "POST", "/v1/shards/rack-a/lease", {
        token: as("compute-0"),
        body: { agent: "compute-0", token },
      });
      expect(renewed.body.token).to.equal(token);
      const held = await send(ctx.base, "POST", "/v1/shards/rack-a/lease", {
        token: as("compute-1"),
        body: { agent: "compute-1" },
      });
      expectStatus(held, 409);
      expect(held.body.errors[0]).to.include({ code: "shardbridge.lease.held" });
      expect(held.body.errors[0].lease).to.include({ holder: "compute-0", token: null });
      const notAllowed = await send(ctx.base, "POST", "/v1/shards/rack-b/lease", {
        token: as("compute-1"),
        body: { agent: "compute-1" },
      });
      expect(notAllowed.body.errors[0].code).to.equal("shardbridge.shard.agent_not_allowed");
      const undefinedShard = await send(ctx.base, "POST", "/v1/shards/rakc-a/lease", {
        token: as("compute-1"),
        body: { agent: "compute-1" },
      });
      expectStatus(undefinedShard, 404);
      expect(undefinedShard.body.errors[0].code).to.equal("shardbridge.shard.undefined");
      const actsAsAnother = await send(ctx.base, "POST", "/v1/shards/rack-a/lease", {
        token: as("compute-1"),
        body: { agent: "compute-0" },
      });
      expectStatus(actsAsAnother, 403);
      const unknownField = await send(ctx.base, "POST", "/v1/shards/rack-a/lease", {
        body: { agent: "compute-0", ttl_ms: 1 },
      });
      expect(unknownField.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(["ttl_ms"]);
      const malformed = await send(ctx.base, "POST", "/v1/shards/rack-a/lease", { body: '{"agent":' });
      expect(malformed.body.errors[0].code).to.equal("shardbridge.body.malformed");
      const tooLarge = await send(ctx.base, "POST", "/v1/shards/rack-a/lease", {
        body: { agent: "compute-0", pad: "x".repeat(100 * 1024) },
      });
      expectStatus(tooLarge, 413);

      expect(
        (await send(ctx.base, "POST", "/v1/shards/rack-a/fence", { body: { token } })).body,
      ).to.deep.equal({
        allowed: true,
      });
      const othersToken = await send(ctx.base, "POST", "/v1/shards/rack-a/fence", {
        token: as("compute-1"),
        body: { token },
      });
      // Another agent's live token: answered as any token that is not the caller's lease.
      expect(othersToken.body).to.deep.equal({ allowed: false });
      const read = await send(ctx.base, "GET", "/v1/shards/rack-a/lease", { token: as("compute-1") });
      expect(read.body.lease).to.include({ holder: "compute-0", token: null });
      expectStatus(await send(ctx.base, "GET", "/v1/shards/rack-b/lease"), 200); // no lease: null

      const releasedByOther = await send(ctx.base, "DELETE", "/v1/shards/rack-a/lease", {
        token: as("compute-1"),
        body: { agent: "compute-1", token },
      });
      expectStatus(releasedByOther, 409);
      const released = await send(ctx.base, "DELETE", "/v1/shards/rack-a/lease", {
        token: as("compute-0"),
        body: { agent: "compute-0", token },
      });
      expectStatus(released, 204);
      expect(released.text).to.equal("");
    });

    it("shards: the list, one shard, and a shard nobody knows", async () => {
      await send(ctx.base, "PUT", `/v1/nodes/${NODE}`, { body: wholeNode({ shard: "rack-a" }) });
      await acquire("rack-a", "compute-0");
      const list = await send(ctx.base, "GET", "/v1/shards", { token: as("compute-1") });
      expect(list.body.shards.map((s: { name: string }) => s.name)).to.include.members(["rack-a", "rack-b"]);
      const one = await send(ctx.base, "GET", "/v1/shards/rack-a");
      expect(one.body).to.include({ name: "rack-a", defined: true, count: 1, lease_ttl_ms: TTL_MS });
      expectStatus(await send(ctx.base, "GET", "/v1/shards/nowhere"), 404);

      // Forgetting a shard leased once (a node carried it then): refused while it is defined,
      // carries nodes or is held; forgotten once free; then unknown.
      await send(ctx.base, "PUT", `/v1/nodes/${OTHER}`, { body: wholeNode({ shard: "gone" }) });
      const token = await acquire("gone", "compute-0");
      expectStatus(await send(ctx.base, "DELETE", "/v1/shards/gone"), 409); // carries a node
      await send(ctx.base, "DELETE", `/v1/nodes/${OTHER}`);
      expectStatus(await send(ctx.base, "DELETE", "/v1/shards/gone"), 409); // held
      expectStatus(await send(ctx.base, "DELETE", "/v1/shards/rack-a"), 409); // defined
      await send(ctx.base, "DELETE", "/v1/shards/gone/lease", { body: { agent: "compute-0", token } });
      expectStatus(await send(ctx.base, "DELETE", "/v1/shards/gone"), 204);
      expectStatus(await send(ctx.base, "DELETE", "/v1/shards/gone"), 404);
    });

    it("nodes: put, patch, get, list, bulk, delete, and their refusals", async () => {
      expectStatus(
        await send(ctx.base, "PUT", `/v1/nodes/${NODE}`, { body: wholeNode({ shard: "rack-a" }) }),
        201,
      );
      expectStatus(
        await send(ctx.base, "PUT", `/v1/nodes/${NODE}`, { body: wholeNode({ name: "n-1" }) }),
        200,
      );
      const withoutShard = await send(ctx.base, "PUT", `/v1/nodes/${OTHER}`, {
        body: { name: null, conductor_group: "", instance_host: null },
      });
      expect(withoutShard.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(["shard"]);
      const gzip = await send(ctx.base, "PUT", `/v1/nodes/${OTHER}`, {
        body: wholeNode({}),
        headers: { "content-encoding": "gzip" },
      });
      expectStatus(gzip, 415);
      expect(
        (await send(ctx.base, "PATCH", `/v1/nodes/${NODE}`, { body: { shard: "rack-b" } })).body,
      ).to.include({
        shard: "rack-b",
      });
      expectStatus(await send(ctx.base, "PATCH", `/v1/nodes/${OTHER}`, { body: { shard: "rack-b" } }), 404);
      expect(
        (await send(ctx.base, "GET", `/v1/nodes/${NODE}`, { token: as("compute-1") })).body.name,
      ).to.equal("n-1");
      expectStatus(await send(ctx.base, "GET", `/v1/nodes/${OTHER}`), 404);
      const bulk = await send(ctx.base, "POST", "/v1/nodes/bulk", {
        body: { nodes: [wholeNode({ uuid: OTHER, shard: "rack-a" })] },
      });
      expect(bulk.body).to.deep.equal({ created: 1, updated: 0 });
      const emptyBulk = await send(ctx.base, "POST", "/v1/nodes/bulk", { body: { nodes: [] } });
      expect(emptyBulk.body.errors[0].field).to.equal("nodes");
      const page = await send(ctx.base, "GET", "/v1/nodes?limit=1");
      expect(page.body.nodes).to.have.length(1);
      expect(page.body.next).to.match(/^\/v1\/nodes\?limit=1&marker=/);
      const second = await send(ctx.base, "GET", page.body.next);
      expect(second.body.nodes).to.have.length(1);
      const badQuery = await send(ctx.base, "GET", "/v1/nodes?limit=0&sharded=maybe");
      expect(badQuery.body.errors.map((e: { field: string }) => e.field).sort()).to.deep.equal([
        "limit",
        "sharded",
      ]);
      // The reason says what is wrong with the number, not that it is none.
      expect(badQuery.body.errors.find((e: { field: string }) => e.field === "limit").detail).to.match(
        /at least 1/,
      );
      expectStatus(await send(ctx.base, "DELETE", `/v1/nodes/${OTHER}`), 204);
      expectStatus(await send(ctx.base, "DELETE", `/v1/nodes/${OTHER}`), 404);
    });

    it("agents: heartbeat, the list, an agent's nodes, and their refusals", async () => {
      await send(ctx.base, "PUT", `/v1/nodes/${NODE}`, { body: wholeNode({ shard: "rack-a" }) });
      await send(ctx.base, "PUT", `/v1/nodes/${OTHER}`, { body: wholeNode({}) });
      const beat = await send(ctx.base, "POST", "/v1/agents/compute-0/heartbeat", {
        token: as("compute-0"),
        body: { shards: ["rack-a"] },
      });
      expect(beat.body).to.include({ agent: "compute-0" });
      await send(ctx.base, "POST", "/v1/agents/compute-1/heartbeat", {
        token: as("compute-1"),
        body: { shards: [] },
      });
      const noShards = await send(ctx.base, "POST", "/v1/agents/compute-0/heartbeat", {
        token: as("compute-0"),
        body: {},
      });
      expect(noShards.body.errors[0].field).to.equal("shards");
      const token = await acquire("rack-a", "compute-0");
      await acquire("rack-b", "compute-0"); // a holder with no node there
      const agents = await send(ctx.base, "GET", "/v1/agents", { token: TEST_TOKENS.inspector });
      expect(agents.body.agents.map((a: { id: string }) => a.id).sort()).to.deep.equal([
        "compute-0",
        "compute-1",
      ]);
      const mine = await send(ctx.base, "GET", `/v1/agents/compute-0/nodes?token=${token}`, {
        token: as("compute-0"),
      });
      expect(mine.body.nodes).to.deep.include(
        wholeNode({ uuid: NODE, shard: "rack-a", token, via: "lease" }),
      );
      const ring = await send(ctx.base, "GET", "/v1/agents/compute-1/nodes?token=", {
        token: as("compute-1"),
      });
      expect(ring.body.legacy).to.include({ pool_member: true, ring: "tooz" });
      const noTokens = await send(ctx.base, "GET", "/v1/agents/compute-0/nodes", { token: as("compute-0") });
      expect(noTokens.body.errors[0].field).to.equal("token");
      // compute-1 is in nova's ring: another spelling of it is one host to nova.
      const twinBeat = await send(ctx.base, "POST", "/v1/agents/Compute-1/heartbeat", {
        body: { shards: [] },
      });
      expectStatus(twinBeat, 409);
      expectStatus(await send(ctx.base, "GET", "/v1/agents/Compute-1/nodes"), 409);

      // Forgetting an agent: refused while it is up or holds a lease; one gone quiet past
      // the down time (50 ms here, on an app of its own) is forgotten; an unknown one 404.
      expect((await send(ctx.base, "DELETE", "/v1/agents/compute-1")).body.errors[0].code).to.equal(
        "shardbridge.agent.active",
      );
      const quick = await listen(
        bridgeApp(ctx.store, { authority: testAuthority(), legacy: { serviceDownMs: 50 } }),
      );
      try {
        await send(quick.url, "POST", "/v1/agents/compute-9/heartbeat", { body: { shards: [] } });
        await new Promise((r) => setTimeout(r, 80));
        expectStatus(await send(quick.url, "DELETE", "/v1/agents/compute-0"), 409); // holds rack-a
        expectStatus(await send(quick.url, "DELETE", "/v1/agents/compute-9"), 204);
        const left = (await send(quick.url, "GET", "/v1/agents")).body.agents.map(
          (a: { id: string }) => a.id,
        );
        expect(left).to.not.include("compute-9");
        expectStatus(await send(quick.url, "DELETE", "/v1/agents/compute-9"), 404);
      } finally {
        await quick.close();
      }
    });

    it("inspection: the webhook, a node's traits, and their refusals", async () => {
      await send(ctx.base, "PUT", `/v1/nodes/${NODE}`, { body: wholeNode({ shard: "rack-a" }) });
      const deltas = (sequence: number, list: string[], node = NODE) => ({
        kind: "deltas",
        node,
        sequence,
        deltas: list,
      });
      const applied = await postWebhook(ctx.base, deltas(1, ["+CUSTOM_BOOT_CONTRACT"]), {
        delivery: "contract-1",
      });
      expect(applied.body).to.deep.include({ node: NODE, applied: ["+CUSTOM_BOOT_CONTRACT"] });
      const replayed = await postWebhook(ctx.base, deltas(1, ["+CUSTOM_BOOT_CONTRACT"]), {
        delivery: "contract-1",
      });
      expect(replayed.replay).to.equal(true);
      expect((await postWebhook(ctx.base, deltas(1, ["+CUSTOM_BOOT_AGAIN"]))).body.errors[0].code).to.equal(
        "shardbridge.traits.stale",
      );
      const notOwned = await postWebhook(ctx.base, deltas(2, ["+COMPUTE_NODE"]));
      expect(notOwned.status).to.equal(422);
      expect(notOwned.body.errors[0]).to.include({
        code: "shardbridge.traits.not_owned",
        field: "COMPUTE_NODE",
      });
      expect((await postWebhook(ctx.base, deltas(3, ["+CUSTOM_BOOT_X"], OTHER))).status).to.equal(404);
      const badName = await postWebhook(ctx.base, deltas(3, ["+not_a_trait"]));
      expect(badName.status).to.equal(400);
      const unsigned = await send(ctx.base, "POST", "/v1/inspector/webhook", {
        token: TEST_TOKENS.inspector,
        body: deltas(3, ["+CUSTOM_BOOT_X"]),
      });
      expect(unsigned.body.errors[0].code).to.equal("shardbridge.inspector.unsigned");
      const traits = await send(ctx.base, "GET", `/v1/nodes/${NODE}/traits`, { token: as("compute-1") });
      expect(traits.body.traits).to.deep.equal([{ name: "CUSTOM_BOOT_CONTRACT", owner: "inspector" }]);
      expectStatus(await send(ctx.base, "GET", `/v1/nodes/${OTHER}/traits`), 404);
      // The operator's repair: the order forgotten, so sequence 1 would apply again.
      const reset = await send(ctx.base, "POST", `/v1/nodes/${NODE}/traits/reset`, { body: { order: true } });
      expect(reset.body).to.deep.include({ node: NODE, applied: [], forgotten: { inspector: 1 } });
      expectStatus(
        await send(ctx.base, "POST", `/v1/nodes/${OTHER}/traits/reset`, { body: { order: true } }),
        404,
      );

      // Without a secret the webhook is not configured: 503, in the same shape.
      const unconfigured = await listen(bridgeApp(ctx.store, { authority: testAuthority() }));
      try {
        expect((await postWebhook(unconfigured.url, deltas(4, ["+CUSTOM_BOOT_X"]))).status).to.equal(503);
      } finally {
        await unconfigured.close();
      }
    });

    it("the trait feed: read and acknowledge as the holder, and the refusals", async () => {
      await send(ctx.base, "PUT", `/v1/nodes/${NODE}`, { body: wholeNode({ shard: "rack-a" }) });
      const token = await acquire("rack-a", "compute-0");
      await postWebhook(ctx.base, { kind: "deltas", node: NODE, deltas: ["+CUSTOM_BOOT_FEED"] });
      const feed = `/v1/shards/rack-a/feed`;
      const read = await send(ctx.base, "GET", `${feed}?token=${token}&limit=10`, { token: as("compute-0") });
      expect(read.body.entries.map((e: { deltas: string[] }) => e.deltas)).to.deep.equal([
        ["+CUSTOM_BOOT_FEED"],
      ]);
      const id = read.body.entries[0].id as string;
      expectStatus(await send(ctx.base, "GET", `${feed}?token=${token}`, { token: as("compute-1") }), 409);
      expectStatus(
        await send(ctx.base, "GET", `${feed}?token=${token + 1}`, { token: as("compute-0") }),
        409,
      );
      const noToken = await send(ctx.base, "GET", feed, { token: as("compute-0") });
      expect(noToken.body.errors[0].field).to.equal("token");
      const ack = `${feed}/ack`;
      const acked = await send(ctx.base, "POST", ack, { token: as("compute-0"), body: { token, id } });
      expect(acked.body).to.deep.equal({ shard: "rack-a", cursor: id });
      const unknown = await send(ctx.base, "POST", ack, { body: { token, id: "99999999999999-0" } });
      expect(unknown.body.errors[0]).to.include({ code: "shardbridge.feed.unknown_entry", field: "id" });
      expectStatus(await send(ctx.base, "POST", ack, { token: as("compute-1"), body: { token, id } }), 409);
      const badId = await send(ctx.base, "POST", ack, { body: { token, id: "latest" } });
      expect(badId.body.errors[0].field).to.equal("id");
    });

    it("the status page: log in, the page, its files and events, log out, and the refusals", async () => {
      const base = ctx.base;
      const FORM = { "content-type": "application/x-www-form-urlencoded" };
      const logIn = (token: string, headers: Record<string, string> = {}) =>
        send(base, "POST", "/ui/login", {
          token: null,
          body: new URLSearchParams({ token }).toString(),
          headers: { ...FORM, ...headers },
        });
      const formAgain = (answer: { text: string; headers: Headers }) => {
        expect(answer.text).to.include('<form method="post" action="/ui/login">');
        expect(answer.headers.get("set-cookie"), "a refusal sets no cookie").to.equal(null);
      };

      // Without a session: to the login form; the form.
      const noSession = await send(base, "GET", "/ui", { token: null });
      expectStatus(noSession, 303);
      expect(noSession.headers.get("location")).to.equal("/ui/login");
      expect(noSession.text).to.equal("");
      const form = await send(base, "GET", "/ui/login", { token: null });
      expectStatus(form, 200);
      expect(form.text).to.include('name="token"');

      // Refused logins: the form again, with the reason, and no cookie.
      const refusals: Array<[string, number, string]> = [
        ["", 400, "Enter a viewer or admin token."],
        ["not-a-token-of-this-bridge", 401, "not known to this bridge"],
        [as("compute-0"), 403, "viewer and admin tokens"],
        [TEST_TOKENS.inspector, 403, "viewer and admin tokens"],
      ];
      for (const [token, status, reason] of refusals) {
        const refused = await logIn(token);
        expect(refused.status, `login with ${token || "no token"}`).to.equal(status);
        expect(refused.text).to.include(reason);
        formAgain(refused);
      }
      // No body at all is no token either; a body that is not a form, or over 4 KiB, is refused as the API refuses.
      formAgain(await send(base, "POST", "/ui/login", { token: null }));
      const json = await send(base, "POST", "/ui/login", {
        token: null,
        body: { token: TEST_TOKENS.viewer },
      });
      expectStatus(json, 415);
      expect(json.body.errors[0].code).to.equal("shardbridge.body.invalid");
      const tooLarge = await logIn("x".repeat(5000));
      expectStatus(tooLarge, 413);
      expect(tooLarge.body.errors[0].code).to.equal("shardbridge.body.too_large");
      // A form posted from a page of another origin: 403 before the token is looked at.
      const crossOrigin = await logIn(TEST_TOKENS.viewer, { origin: "https://elsewhere.example" });
      expectStatus(crossOrigin, 403);
      expect(crossOrigin.body.errors[0].code).to.equal("shardbridge.auth.forbidden");
      expect(crossOrigin.headers.get("set-cookie")).to.equal(null);
      // "null": a sandboxed frame, a file:// page, a redirect that hid the origin — not the page.
      const nullOrigin = await logIn(TEST_TOKENS.viewer, { origin: "null" });
      expectStatus(nullOrigin, 403);
      expect(nullOrigin.headers.get("set-cookie")).to.equal(null);

      // The page's files; a name of no file's shape is a 400 naming `file`, an unknown one 404.
      for (const [file, type] of Object.entries(STATIC_TYPES)) {
        const got = await send(base, "GET", `/ui/static/${file}`, { token: null });
        expectStatus(got, 200);
        expect(got.headers.get("content-type")).to.equal(type);
      }
      expectStatus(await send(base, "GET", "/ui/static/nothing.js", { token: null }), 404);
      const walk = await send(base, "GET", "/ui/static/..%2Fstatus.html", { token: null });
      expect(walk.body.errors.map((e: { field?: string }) => e.field)).to.deep.equal(["file"]);

      // The events need a session: none, or a cookie nobody signed, is 401.
      for (const cookie of [undefined, `${SESSION_COOKIE}=forged.9999999999.bWFj`]) {
        const refused = await send(base, "GET", "/ui/events", {
          token: TEST_TOKENS.viewer, // a bearer token is not a page session
          ...(cookie !== undefined && { headers: { cookie } }),
        });
        expectStatus(refused, 401);
        expect(refused.body.errors[0].code).to.equal("shardbridge.auth.unauthenticated");
      }

      // A viewer and an admin log in (as a browser posts from the page: same origin) and read.
      for (const token of [TEST_TOKENS.viewer, TEST_TOKENS.admin]) {
        const loggedIn = await logIn(token, { origin: base });
        expectStatus(loggedIn, 303);
        expect(loggedIn.headers.get("location")).to.equal("/ui");
        const cookie = loggedIn.headers.get("set-cookie")!.split(";")[0]!;
        const page = await send(base, "GET", "/ui", { token: null, headers: { cookie } });
        expectStatus(page, 200);
        expect(page.text).to.include('src="/ui/static/status.js"');
        // The event stream's first bytes: the retry field and the first event (the history).
        const url = `${base}/ui/events`;
        const stream = await fetch(url, { headers: { cookie } });
        const start = await checkedStart("GET", url, stream, (text) => text.split("\n\n").length > 2);
        expect(stream.status).to.equal(200);
        expect(start).to.match(/^retry: \d+\n\nevent: history\ndata: \[/);
        // The session cookie opens the page and nothing else: the API answers it 401.
        expectStatus(await send(base, "GET", "/v1/shards", { token: null, headers: { cookie } }), 401);
      }

      // One login's pages: MAX_PAGES_PER_SESSION, then 429 for it — and another login still
      // gets a page. Past the pages a bridge serves (many logins): 503 until one closes.
      const cookieOf = async (app: string, token: string) =>
        (
          await send(app, "POST", "/ui/login", {
            token: null,
            body: new URLSearchParams({ token }).toString(),
            headers: FORM,
          })
        ).headers
          .get("set-cookie")!
          .split(";")[0]!;
      // Each page is its Response, held until the test closes it: undici cancels the body of a
      // Response that is garbage-collected, which would close a page behind the test's back
      // (and count one viewer fewer at the bridge).
      const openPages = (app: string, cookie: string, count: number) =>
        Promise.all(
          Array.from({ length: count }, async () => {
            const abort = new AbortController();
            const res = await fetch(`${app}/ui/events`, { headers: { cookie }, signal: abort.signal });
            expect(res.status).to.equal(200);
            return { close: () => abort.abort(), res };
          }),
        );
      const viewerCookie = await cookieOf(base, TEST_TOKENS.viewer);
      const streams = await openPages(base, viewerCookie, MAX_PAGES_PER_SESSION);
      try {
        const mine = await send(base, "GET", "/ui/events", {
          token: null,
          headers: { cookie: viewerCookie },
        });
        expectStatus(mine, 429);
        expect(mine.body.errors[0].code).to.equal("shardbridge.ui.too_many_pages");
        streams.push(...(await openPages(base, await cookieOf(base, TEST_TOKENS.admin), 1)));
      } finally {
        for (const page of streams) page.close();
      }
      const viewers = Array.from(
        { length: MAX_VIEWERS / MAX_PAGES_PER_SESSION + 1 },
        (_, k) => `viewer-token-${k}-0123456789`,
      );
      const many = await listen(
        bridgeApp(ctx.store, {
          authority: new TokenAuthority({
            tokens: viewers.map((token) => ({ role: "viewer" as const, token })),
          }),
        }),
      );
      const crowd: Array<{ close: () => void; res: Response }> = [];
      try {
        for (const token of viewers.slice(0, -1))
          crowd.push(...(await openPages(many.url, await cookieOf(many.url, token), MAX_PAGES_PER_SESSION)));
        const full = await send(many.url, "GET", "/ui/events", {
          token: null,
          headers: { cookie: await cookieOf(many.url, viewers.at(-1)!) },
        });
        expectStatus(full, 503);
        expect(full.body.errors[0].code).to.equal("shardbridge.ui.too_many_viewers");
      } finally {
        for (const page of crowd) page.close();
        await many.close();
      }

      // Log out: the cookie cleared (refused from another origin).
      const foreign = await send(base, "POST", "/ui/logout", {
        token: null,
        headers: { origin: "https://elsewhere.example" },
      });
      expectStatus(foreign, 403);
      expect(foreign.headers.get("set-cookie")).to.equal(null);
      const out = await send(base, "POST", "/ui/logout", { token: null, headers: { cookie: viewerCookie } });
      expectStatus(out, 303);
      expect(out.headers.get("location")).to.equal("/ui/login");
      expect(out.headers.get("set-cookie")).to.match(new RegExp(`^${SESSION_COOKIE}=; .*Max-Age=0`));
    });

    it("shard definitions: list, define, replace, remove, and their refusals", async () => {
      const defs = "/v1/shard-definitions";
      const created = await send(ctx.base, "PUT", `${defs}/rack-s`, {
        body: { lease_ttl_ms: 9000, agents: ["compute-0"], filling: true },
      });
      expectStatus(created, 201);
      expectStatus(await send(ctx.base, "PUT", `${defs}/rack-s`, { body: { description: "S" } }), 200);
      const listed = await send(ctx.base, "GET", defs, { token: TEST_TOKENS.inspector });
      expect(listed.body.definitions.map((d: { source: string }) => d.source)).to.include.members([
        "file",
        "store",
      ]);
      const shown = await send(ctx.base, "GET", "/v1/shards/rack-s");
      expect(shown.body).to.include({ defined_by: "store", filling: false });
      const badTtl = await send(ctx.base, "PUT", `${defs}/rack-s`, { body: { lease_ttl_ms: 1 } });
      expect(badTtl.body.errors[0].field).to.equal("lease_ttl_ms");
      expectStatus(await send(ctx.base, "PUT", `${defs}/rack-a`, { body: {} }), 409);
      expectStatus(await send(ctx.base, "DELETE", `${defs}/rack-a`), 409);
      expectStatus(await send(ctx.base, "DELETE", `${defs}/rack-s`), 204);
      expectStatus(await send(ctx.base, "DELETE", `${defs}/rack-s`), 404);
    });

    it("Ironic delivery without an Ironic", async () => {
      const delivery = await send(ctx.base, "GET", "/v1/ironic/delivery", { token: TEST_TOKENS.inspector });
      expect(delivery.body).to.deep.equal({ configured: false });
    });

    it("answered every operation with its success and its main refusals", () => {
      expect(unseen(ops), "answers no test here received: add a request for each to this file").to.deep.equal(
        [],
      );
    });
  });
}

describe("OpenAPI contract: the fenced Ironic endpoint, against the real Ironic", function () {
  this.timeout(400_000);
  const peer = useIronicPeer("the fenced endpoint's contract");
  const SHARD = "rack-f";
  const catalog = new ShardCatalog([{ name: SHARD, description: "", lease_ttl_ms: 60_000 }]);
  const ctx = useApp(memoryUnderTest(), (store) =>
    bridgeApp(store, {
      authority: testAuthority(),
      catalog,
      ironicUrl: peer.peer.endpoint,
      // Delivery configured (not started: only its report is asked for here).
      ironic: new IronicQueueDelivery(store.traits.ironicQueue, store.ironicOwners, {
        endpoint: peer.peer.endpoint,
      }),
    }),
  );
  const ops = OPERATIONS.filter(isFenced);
  const IRONIC = { "x-openstack-ironic-api-version": "1.82" };

  before(() => apiContract().seen.clear());

  it("passes reads and the holder's writes to Ironic, fences the others, refuses bad paths", async () => {
    const mine = await createIronicNode(peer.peer.endpoint, { name: "contract-mine", shard: SHARD });
    const got = await send(ctx.base, "POST", `/v1/shards/${SHARD}/lease`, { body: { agent: "compute-0" } });
    const token = got.body.token as number;
    const key = got.body.fence_key as string;
    const through = (t: number | string) => `/fenced/${SHARD}/lease-${t}-${key}/ironic`;
    const ironic = (method: string, path: string, body?: unknown, t: number | string = token) =>
      send(ctx.base, method, `${through(t)}${path}`, {
        token: null,
        headers: { ...IRONIC, ...(body !== undefined && { "content-type": "application/json" }) },
        ...(body !== undefined && { body }),
      });

    // Reads at the root (version discovery) and under it.
    for (const method of ["GET", "HEAD", "OPTIONS"]) {
      for (const path of ["", `/v1/nodes/${mine}`]) {
        const answer = await ironic(method, path);
        expect(answer.status, `${method} ${path}`).to.be.below(500);
      }
    }
    expect((await ironic("GET", `/v1/nodes/${mine}`)).body.shard).to.equal(SHARD);
    // The holder's writes about its node reach Ironic.
    const patched = await ironic("PATCH", `/v1/nodes/${mine}`, [
      { op: "add", path: "/extra/contract", value: "yes" },
    ]);
    expectOk(patched, 200);
    expectOk(await ironic("PUT", `/v1/nodes/${mine}/traits/CUSTOM_CONTRACT`), 204);
    expectOk(await ironic("DELETE", `/v1/nodes/${mine}/traits/CUSTOM_CONTRACT`), 204);
    const port = await ironic("POST", "/v1/ports", { node_uuid: mine, address: "52:54:00:c0:ff:01" });
    expectOk(port, 201);
    // Reads under a credential that is not the live lease: fenced too.
    for (const method of ["GET", "HEAD", "OPTIONS"])
      for (const path of ["", `/v1/nodes/${mine}`]) {
        const stale = await ironic(method, path, undefined, token + 1);
        expect(stale.status, `${method} ${path} under a stale token`).to.equal(409);
      }
    // Fenced: a token that is not the live lease (under it), a write about no node (the root).
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const stale = await ironic(
        method,
        `/v1/nodes/${mine}`,
        method === "DELETE" ? undefined : {},
        token + 1,
      );
      expect(stale.status, `${method} under a stale token`).to.equal(409);
      expect(stale.body.errors[0].code).to.equal("shardbridge.lease.fenced");
      const root = await ironic(method, "", method === "DELETE" ? undefined : {});
      expect(root.status, `${method} at the root`).to.equal(409);
    }
    // Not a fenced path (no token), and a shard segment that is not percent-encoding.
    for (const op of ops) {
      const notFenced = await send(
        ctx.base,
        op.method,
        fill(op.path, { shard: SHARD, token: "x", fence_key: key }),
        {
          token: null,
        },
      );
      expect(notFenced.status, `${op.method} ${op.path} without a token`).to.equal(404);
      const badShard = await send(
        ctx.base,
        op.method,
        fill(op.path, { shard: "%E0%A4%A", token, fence_key: key }),
        {
          token: null,
        },
      );
      expect(badShard.status, `${op.method} ${op.path} with a bad shard`).to.equal(400);
    }
    // The bridge with an Ironic reports its delivery.
    const delivery = await send(ctx.base, "GET", "/v1/ironic/delivery");
    expect(delivery.body).to.include({ configured: true, pending_changes: 0 });

    // An Ironic that does not answer: 502, for a read and for the fence's own lookup.
    const gone = await listen(
      bridgeApp(ctx.store, {
        authority: testAuthority(),
        catalog,
        ironicUrl: `http://127.0.0.1:${await freePort()}`,
      }),
    );
    try {
      for (const method of ["GET", "PATCH"]) {
        const answer = await send(gone.url, method, `${through(token)}/v1/nodes/${mine}`, {
          token: null,
          ...(method === "PATCH" && { body: [] }),
        });
        expect(answer.status, method).to.equal(502);
        expect(answer.body.errors[0].code).to.equal("shardbridge.ironic.unreachable");
      }
    } finally {
      await gone.close();
    }
  });

  it("answered every operation with Ironic's answer and its main refusals", () => {
    expect(unseen(ops), "answers no test here received: add a request for each to this file").to.deep.equal(
      [],
    );
  });
});

function expectOk(answer: { status: number; text: string }, status: number): void {
  expect(answer.status, answer.text).to.equal(status);
}
