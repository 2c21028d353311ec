import { versionInfo } from "../../runtime/version.js";
import { bodyPolicyOf } from "../http/limits.js";
import { PAGE_ROLES } from "../http/auth.js";
import { ALL_ROLES, type Media, type Operation, type RefusalAnswer, type Success } from "./operation.js";
import { OPERATIONS } from "./operations.js";
import { fromZod, HEADERS, PARAMETERS, SCHEMAS, SECURITY_SCHEMES, type JsonSchema } from "./schemas.js";

/**
 * The OpenAPI 3.1 document of the bridge's HTTP API, served at GET /openapi.json. Built
 * from the operations the route files declare (listed in operations.ts) and the components
 * (schemas.ts): request schemas come from the zod schemas the routes validate with, so the
 * document cannot say other than validation does. Here the rules every operation of a kind shares: who may
 * call it (security, and 401/403), what a body or a parameter adds (400, 413, 415), what
 * any operation may answer (500, and 503 when it reaches the store), and what every page
 * route sends (its security headers; a form posted from another origin refused).
 */

const SIG = "https://specs.openstack.org/openstack/api-sig/guidelines/errors.html";

/** Refusals many operations answer alike; where an operation's is exactly one of these, it refers to it (components.responses). */
const COMMON: Record<string, { status: number; refusal: RefusalAnswer }> = {
  Unauthenticated: {
    status: 401,
    refusal: { description: "no bearer token, or an unknown one", codes: ["auth.unauthenticated"] },
  },
  BodyTooLarge: {
    status: 413,
    refusal: { description: "the body is over the limit", codes: ["body.too_large"] },
  },
  BodyNotDecoded: {
    status: 415,
    refusal: {
      description: "a content encoding or charset the bridge does not decode",
      codes: ["body.invalid"],
    },
  },
  InternalError: {
    status: 500,
    refusal: { description: "a bug: the log has it under the same request id", codes: ["internal"] },
  },
  StoreUnavailable: {
    status: 503,
    refusal: {
      description: "the store did not answer (Redis down, a timeout)",
      codes: ["store.unavailable"],
    },
  },
};

/** The refusals an operation shares with every other of its kind, by status. */
function sharedRefusals(op: Operation): Record<number, RefusalAnswer> {
  const shared: Record<number, RefusalAnswer> = {};
  const add = (status: number, refusal: RefusalAnswer) => {
    shared[status] = shared[status] === undefined ? refusal : merge(shared[status], refusal);
  };
  const { access } = op;
  if (access.kind === "page") {
    if (access.session === "required")
      add(401, {
        description: "no page session, or a lapsed or forged one: log in at `/ui/login`",
        codes: ["auth.unauthenticated"],
      });
    // assertSameOrigin: a browser names the page a form comes from
    if (op.method === "post")
      add(403, {
        description:
          "posted from a page of another origin (`Origin` names a host other than `Host` and `X-Forwarded-Host`)",
        codes: ["auth.forbidden"],
      });
  }
  if (access.kind === "bearer" || access.kind === "webhook") {
    add(401, COMMON.Unauthenticated!.refusal);
    const { roles } = access;
    if (roles.length < ALL_ROLES.length)
      add(403, { description: `a role other than ${roles.join(" or ")}`, codes: ["auth.forbidden"] });
    if (access.kind === "bearer" && access.actsAs === true)
      add(403, { description: "an agent acting as another agent", codes: ["auth.forbidden"] });
  }
  if (op.parameters !== undefined || op.query !== undefined || op.body !== undefined)
    add(400, {
      description: "a field breaks a rule: one error per field, each naming it in `field`",
      codes: ["validation", ...(op.parameters !== undefined ? ["request.invalid"] : [])],
    });
  if (op.body !== undefined || op.form !== undefined) {
    if (op.body !== undefined && op.body !== "any")
      add(400, { description: "the body is not JSON", codes: ["body.malformed"] });
    add(413, COMMON.BodyTooLarge!.refusal);
    add(415, COMMON.BodyNotDecoded!.refusal);
  }
  add(500, COMMON.InternalError!.refusal);
  if (op.store !== false) add(503, COMMON.StoreUnavailable!.refusal);
  return shared;
}

function merge(a: RefusalAnswer, b: RefusalAnswer): RefusalAnswer {
  const codes = [...new Set([...(a.codes ?? []), ...(b.codes ?? [])])];
  const content = [...(a.content ?? []), ...(b.content ?? [])].filter(
    (media, i, all) => all.findIndex((other) => other.type === media.type) === i,
  );
  const headers = { ...a.headers, ...b.headers };
  return {
    description: `${a.description}; ${b.description}`,
    ...(codes.length > 0 && { codes }),
    ...((a.schema ?? b.schema) !== undefined && { schema: (a.schema ?? b.schema)! }),
    ...((a.ironic === true || b.ironic === true) && { ironic: true }),
    ...(content.length > 0 && { content }),
    ...(Object.keys(headers).length > 0 && { headers }),
  };
}

/** The Error schema with each error's status and its possible codes spelt out. */
function errorsWith(status: number, codes: readonly string[]): JsonSchema {
  return {
    $ref: "#/components/schemas/Error",
    type: "object",
    properties: {
      errors: {
        type: "array",
        items: {
          type: "object",
          properties: {
            status: { const: status },
            code: { enum: codes.map((code) => `shardbridge.${code}`) },
          },
        },
      },
    },
  };
}

const requestIdHeader = { "X-Request-Id": { $ref: "#/components/headers/RequestId" } };

/** A response's content: its JSON schema, if any, then its bodies of other types. */
function contentOf(json: JsonSchema | undefined, other: readonly Media[] = []): JsonSchema | undefined {
  const media = [...(json !== undefined ? [{ type: "application/json", schema: json }] : []), ...other];
  if (new Set(media.map((m) => m.type)).size !== media.length)
    throw new Error(`two bodies of one type: ${media.map((m) => m.type).join(", ")}`);
  return media.length === 0
    ? undefined
    : Object.fromEntries(media.map(({ type, schema }) => [type, { schema }]));
}

/** A response object: `status` 0 for `default` (a success). */
function response(status: number, answer: Success | RefusalAnswer, op: Operation): JsonSchema {
  const headers: Record<string, unknown> = { ...requestIdHeader };
  if (status === 401 && (op.access.kind === "bearer" || op.access.kind === "webhook"))
    headers["WWW-Authenticate"] = {
      $ref: `#/components/headers/${op.access.kind === "webhook" ? "WwwAuthenticateBearerOnly" : "WwwAuthenticate"}`,
    };
  // A delivery seen before gets its first answer again, whatever it was.
  if (op.access.kind === "webhook") headers["X-Shardbridge-Replay"] = { $ref: "#/components/headers/Replay" };
  // Every /ui answer, refusals and redirects too (ui/routes.ts sets them ahead of the routes).
  if (op.access.kind === "page")
    headers["Content-Security-Policy"] = { $ref: "#/components/headers/ContentSecurityPolicy" };
  Object.assign(headers, answer.headers);
  if (status >= 400) {
    const refusal = answer as RefusalAnswer;
    const own = refusal.codes === undefined ? undefined : errorsWith(status, refusal.codes);
    const shapes = [
      ...(own !== undefined ? [own] : []),
      ...(refusal.schema !== undefined ? [{ $ref: `#/components/schemas/${refusal.schema}` }] : []),
      ...(refusal.ironic === true ? [{ $ref: "#/components/schemas/IronicError" }] : []),
    ];
    const codes = refusal.codes?.map((code) => `\`shardbridge.${code}\``).join(", ");
    const content = contentOf(
      shapes.length === 0 ? undefined : shapes.length === 1 ? shapes[0] : { anyOf: shapes },
      refusal.content,
    );
    return {
      description: codes === undefined ? refusal.description : `${refusal.description} (${codes})`,
      headers,
      ...(content !== undefined && { content }),
    };
  }
  const content = contentOf(
    answer.schema === undefined ? undefined : { $ref: `#/components/schemas/${answer.schema}` },
    answer.content,
  );
  return { description: answer.description, headers, ...(content !== undefined && { content }) };
}

/** A page route's security: the session cookie, as the route needs it. */
function pageSecurity(session: "none" | "optional" | "required"): { security: JsonSchema[]; roles: string } {
  const requirement = { pageSession: [...PAGE_ROLES] };
  const cookie = `a page session (the \`${SECURITY_SCHEMES.pageSession.name}\` cookie \`POST /ui/login\` sets for a ${PAGE_ROLES.map((r) => `\`${r}\``).join(" or ")} token)`;
  if (session === "none") return { security: [], roles: "No credential." };
  if (session === "optional")
    return {
      security: [requirement, {}],
      roles: `With ${cookie}, or without (then a redirect to the login).`,
    };
  return { security: [requirement], roles: `Needs ${cookie}.` };
}

/** Who may call: the security requirement, and the same in words. */
function security(op: Operation): { security: JsonSchema[]; roles: string } {
  switch (op.access.kind) {
    case "public":
      return { security: [], roles: "No token." };
    case "ironic":
      return {
        security: [],
        roles:
          "No bridge token: the caller's own headers (X-Auth-Token, microversions) go to Ironic as they are, and the bridge adds no credential.",
      };
    case "webhook": {
      const { roles } = op.access;
      return {
        security: [{ bearer: [...roles], webhookSignature: [], webhookTimestamp: [] }],
        roles: `Roles: ${roles.map((role) => `\`${role}\``).join(", ")}, with the delivery signed (X-Shardbridge-Timestamp, X-Shardbridge-Signature).`,
      };
    }
    case "page":
      return pageSecurity(op.access.session);
    case "bearer": {
      const { roles, actsAs } = op.access;
      const named = roles.map((role) =>
        role === "agent" && actsAs === true ? "`agent` (as itself)" : `\`${role}\``,
      );
      return { security: [{ bearer: [...roles] }], roles: `Roles: ${named.join(", ")}.` };
    }
  }
}

function parameters(op: Operation): JsonSchema[] {
  const inPath = (op.parameters ?? []).map((name) => ({ $ref: `#/components/parameters/${name}` }));
  if (op.query === undefined) return inPath;
  const query = fromZod(op.query.schema) as { properties: Record<string, JsonSchema>; required?: string[] };
  return [
    ...inPath,
    ...Object.entries(query.properties).map(([name, schema]) => ({
      name,
      in: "query",
      required: query.required?.includes(name) ?? false,
      description: op.query!.describe[name],
      schema,
    })),
  ];
}

function operationObject(op: Operation): JsonSchema {
  const { security: requirement, roles } = security(op);
  const answers: Record<string, Success | RefusalAnswer> = { ...sharedRefusals(op) };
  for (const [status, answer] of Object.entries(op.answers)) {
    const shared = answers[status];
    answers[status] = shared !== undefined && Number(status) >= 400 ? merge(answer, shared) : answer;
  }
  const responses = Object.fromEntries(
    Object.entries(answers)
      .sort(([a], [b]) => (a === "default" ? 1 : b === "default" ? -1 : Number(a) - Number(b)))
      .map(([status, answer]) => {
        const built = response(status === "default" ? 0 : Number(status), answer, op);
        const common = COMMON_BY_TEXT.get(JSON.stringify(built));
        return [status, common === undefined ? built : { $ref: `#/components/responses/${common}` }];
      }),
  );
  const limit = bodyPolicyOf(op).limit;
  const body: { type: string; schema: JsonSchema; required: boolean; passed?: true } | undefined =
    op.form !== undefined
      ? {
          type: "application/x-www-form-urlencoded",
          schema: { $ref: `#/components/schemas/${op.form}` },
          required: true,
        }
      : op.body === "any"
        ? { type: "*/*", schema: {}, required: false, passed: true }
        : op.body !== undefined
          ? { type: "application/json", schema: { $ref: `#/components/schemas/${op.body}` }, required: true }
          : undefined;
  return {
    operationId: op.id,
    tags: [op.tag],
    summary: op.summary,
    description: [op.description, roles].filter((part) => part !== undefined).join("\n\n"),
    security: requirement,
    ...(op.parameters !== undefined || op.query !== undefined ? { parameters: parameters(op) } : {}),
    ...(body !== undefined && {
      requestBody: {
        required: body.required,
        description: `At most ${limit / 1024} KiB${body.passed === true ? ", passed to Ironic as it is" : ""}.`,
        content: { [body.type]: { schema: body.schema } },
      },
    }),
    responses,
  };
}

/** The common refusals as a bearer operation answers them: components.responses. */
const COMMON_RESPONSES = Object.fromEntries(
  Object.entries(COMMON).map(([name, { status, refusal }]) => [
    name,
    response(status, refusal, { access: { kind: "bearer", roles: ALL_ROLES } } as Operation),
  ]),
);
const COMMON_BY_TEXT = new Map(
  Object.entries(COMMON_RESPONSES).map(([name, built]) => [JSON.stringify(built), name]),
);

function build(): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of OPERATIONS) {
    const item = (paths[op.path] ??= {});
    if (item[op.method] !== undefined) throw new Error(`${op.method} ${op.path} is in the table twice`);
    // viewersRead refuses a viewer anything but GET and HEAD, whatever the table says.
    const reads = op.method === "get" || op.method === "head";
    if (op.access.kind === "bearer" && op.access.roles.includes("viewer") && !reads)
      throw new Error(`${op.method} ${op.path} lists the viewer role, which reads only`);
    item[op.method] = operationObject(op);
  }
  const { version } = versionInfo();
  return {
    openapi: "3.1.0",
    info: {
      title: "shardbridge",
      version,
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
      description: [
        "Per-shard active/passive leases with fencing tokens between OpenStack Ironic and nova-compute, node assignment by shard key, and inspection trait deltas.",
        "JSON in, JSON out; unknown fields are refused. Every `/v1` route takes `Authorization: Bearer <token>`, checked before the body is read. " +
          `Every refusal has the OpenStack API-SIG shape (${SIG}): \`{"errors":[{"status","code","title","detail",…}]}\`, the first error's status the answer's; a refused request writes nothing. ` +
          "The status page's routes (`/ui`) are for a browser: HTML, its files and server-sent events, a login form that sets a session cookie (`pageSession`) in place of the bearer token, and refusals of the form as the form again, in HTML. " +
          "Besides the answers listed per operation, any request may get `404 shardbridge.route.not_found` (no such route), and Node's parser answers `400 shardbridge.request.malformed`, `408 shardbridge.request.timeout` or `431 shardbridge.request.headers_too_large` before any route, in the same shape.",
        "The narrative (the lease model, tokens and roles, the trait feed, the fenced Ironic endpoint) is docs/API.md.",
      ].join("\n\n"),
    },
    tags: [
      { name: "operations", description: "Health, readiness, metrics, this document: no token" },
      { name: "leases", description: "Per-shard leases and fencing tokens" },
      { name: "shards", description: "Shards, their definitions and holders" },
      { name: "nodes", description: "The node registry: shard keys, conductor groups, instance hosts" },
      { name: "agents", description: "Agents' heartbeats and node lists" },
      { name: "traits", description: "Inspection results, trait deltas and each shard's trait feed" },
      { name: "ironic", description: "Delivery of trait changes to Ironic" },
      {
        name: "status page",
        description: "The operator's page (`/ui`): a login form, a session cookie, the page and its events",
      },
      {
        name: "fenced Ironic",
        description: "A reverse proxy to Ironic whose writes pass only under a live lease",
      },
    ],
    paths,
    components: {
      schemas: SCHEMAS,
      responses: COMMON_RESPONSES,
      parameters: PARAMETERS,
      headers: HEADERS,
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}

let built: { document: JsonSchema; text: string } | undefined;

/** The document (built once: it depends on nothing but the code). */
export function openApiDocument(): JsonSchema {
  built ??= (() => {
    const document = build();
    return { document, text: JSON.stringify(document) };
  })();
  return built.document;
}

/** The document as the JSON GET /openapi.json sends. */
export function openApiText(): string {
  openApiDocument();
  return built!.text;
}
