import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import ajvFormats from "ajv-formats";
import { openApiDocument } from "../../src/api/openapi/document.js";
import { ANSWERS } from "../../src/api/openapi/schemas.js";

// ajv-formats is CommonJS: under ESM its plugin is the module's `default` member.
const addFormats = ajvFormats.default;

/** What a test received: enough of an HTTP exchange to hold it against the document. */
export interface Exchange {
  method: string;
  /** the path and query the request went to */
  url: string;
  status: number;
  headers: Headers;
  /** the body as received ("" for none) */
  text: string;
}

type Json = Record<string, any>;

const BASE = "https://shardbridge.invalid/openapi.json";
/** Path parameters marked so match the rest of the path, slashes and all (Ironic's path under the fenced endpoint). */
const REST_OF_PATH = "x-shardbridge-rest-of-path";

interface Route {
  template: string;
  pattern: RegExp;
  item: Json;
}

/**
 * The OpenAPI document as a checker of answers: which operation a request reached, whether
 * the status it got is one that operation documents, and whether the body validates
 * against the schema documented for it (ajv, JSON Schema 2020-12, OpenAPI 3.1's
 * dialect, with formats). Records each operation and status it saw, for the contract test
 * to ask which answers the tests never received.
 */
export class ApiContract {
  readonly document: Json = openApiDocument();
  readonly ajv: Ajv2020;
  /** `METHOD template status` of every documented answer checked */
  readonly seen = new Set<string>();
  private readonly routes: Route[];
  private readonly validators = new Map<string, ValidateFunction>();

  constructor() {
    this.ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(this.ajv);
    // The components' schemas as one schema of $defs: compiling a fragment of the whole
    // document would walk all of it (100 KB) for every schema compiled.
    this.ajv.addSchema({ $id: BASE, $defs: bundled(this.document.components.schemas) });
    const restOfPath = new Set(
      Object.values(this.document.components.parameters as Record<string, Json>)
        .filter((p) => p[REST_OF_PATH] === true)
        .map((p) => p.name as string),
    );
    this.routes = Object.entries(this.document.paths as Record<string, Json>).map(([template, item]) => {
      const source = template
        .split(/(\{[^}]+\})/)
        .map((part) => {
          const name = /^\{(.+)\}$/.exec(part)?.[1];
          if (name === undefined) return part.replace(/[.*+?^$()|[\]\\]/g, "\\$&");
          return restOfPath.has(name) ? "(.*)" : "([^/]+)";
        })
        .join("");
      // As express matches: any case, one trailing slash allowed.
      return { template, pattern: new RegExp(`^${source}/?$`, "i"), item };
    });
    // Every schema compiled now, once: compiled on first use, a schema's compile time would
    // fall inside whatever a test is timing.
    for (const pointer of this.answerSchemas()) this.validator(pointer);
    this.validator("/components/schemas/Error");
    for (const header of Object.values(this.document.components.headers as Record<string, Json>))
      this.compiled(header.schema);
  }

  /** The pointer of every answer schema the document holds. */
  answerSchemas(): string[] {
    const pointers: string[] = [];
    const add = (at: string, response: Json) => {
      for (const type of Object.keys(response.content ?? {}))
        pointers.push(`${at}/content/${escape(type)}/schema`);
    };
    for (const [template, item] of Object.entries(this.document.paths as Record<string, Json>))
      for (const [method, operation] of Object.entries(item))
        for (const [status, response] of Object.entries(operation.responses as Record<string, Json>))
          add(`/paths/${escape(template)}/${method}/responses/${status}`, response);
    for (const [name, response] of Object.entries(this.document.components.responses as Record<string, Json>))
      add(`/components/responses/${name}`, response);
    return pointers;
  }

  /** A response object and where it is: itself, or the component its $ref names. */
  private resolved(at: string, response: Json): { at: string; response: Json } {
    const name = /^#\/components\/responses\/(.+)$/.exec(response.$ref ?? "")?.[1];
    if (name === undefined) return { at, response };
    return { at: `/components/responses/${name}`, response: this.document.components.responses[name] };
  }

  /** A header object: itself, or the component its $ref names. */
  private header(header: Json): Json {
    const name = /^#\/components\/headers\/(.+)$/.exec(header.$ref ?? "")?.[1];
    return name === undefined ? header : this.document.components.headers[name];
  }

  /**
   * The validator of the schema at `pointer` (a JSON pointer into the document). One per
   * distinct schema: operations share most of theirs (the 401, the 500), and a compile
   * costs milliseconds.
   */
  validator(pointer: string): ValidateFunction {
    const schema = bundled(
      pointer
        .slice(1)
        .split("/")
        .map((segment) => segment.replace(/~1/g, "/").replace(/~0/g, "~"))
        .reduce((node: any, segment) => node?.[segment], this.document),
    );
    if (schema === undefined) throw new Error(`the document has nothing at ${pointer}`);
    return this.compiled(schema);
  }

  /** The validator of `schema` (its references already bundled), compiled once. */
  private compiled(schema: Json): ValidateFunction {
    const key = JSON.stringify(schema);
    let validate = this.validators.get(key);
    if (validate === undefined) {
      validate = this.ajv.compile(schema);
      this.validators.set(key, validate);
    }
    return validate;
  }

  /** The documented operation `method path` reaches: its template, or null for none. */
  operationOf(method: string, path: string): { template: string; key: string; operation: Json } | null {
    const lower = method.toLowerCase();
    for (const route of this.routes) {
      if (!route.pattern.test(path)) continue;
      // express answers HEAD with the route for GET
      const key = route.item[lower] !== undefined ? lower : lower === "head" && route.item.get ? "get" : null;
      if (key !== null) return { template: route.template, key, operation: route.item[key] };
    }
    return null;
  }

  /** Throw, saying what differs, unless the exchange is one the document describes. */
  check(exchange: Exchange): void {
    const path = exchange.url.split("?")[0]!;
    const found = this.operationOf(exchange.method, path);
    const where = `${exchange.method} ${exchange.url} -> ${exchange.status}`;
    const contentType = exchange.headers.get("content-type")?.split(";")[0]!.trim() ?? null;
    const body =
      contentType === "application/json" && exchange.text !== "" ? JSON.parse(exchange.text) : exchange.text;
    if (found === null) {
      // No route: a refusal in the API-SIG shape is all there is to say (404 no route,
      // or 401 for a /v1 path without a token: the token is checked before routing).
      this.expectValid("/components/schemas/Error", body, `${where} (no documented operation)`);
      if (exchange.status < 400) throw new Error(`${where}: served, but no operation documents it`);
      return;
    }
    const { template, operation } = found;
    const method = exchange.method.toUpperCase();
    const documented = operation.responses[String(exchange.status)] as Json | undefined;
    const key = documented !== undefined ? String(exchange.status) : "default";
    if (operation.responses[key] === undefined)
      throw new Error(
        `${where}: status ${exchange.status} is not documented for ${method} ${template} ` +
          `(documented: ${Object.keys(operation.responses).join(", ")}); body ${exchange.text.slice(0, 500)}`,
      );
    const { at, response } = this.resolved(
      `/paths/${escape(template)}/${found.key}/responses/${key}`,
      operation.responses[key],
    );
    for (const [name, ref] of Object.entries((response.headers ?? {}) as Record<string, Json>)) {
      const header = this.header(ref);
      const value = exchange.headers.get(name);
      if (value === null) {
        if (header.required === true)
          throw new Error(`${where}: the header ${name}, documented as always sent, is missing`);
        continue;
      }
      const validate = this.compiled(header.schema);
      if (!validate(value))
        throw new Error(
          `${where}: the header ${name} does not match the document: ${this.ajv.errorsText(validate.errors)}; got ${value}`,
        );
    }
    this.seen.add(`${method} ${template} ${key}`);
    if (response.content === undefined) {
      if (key !== "default" && exchange.text !== "" && method !== "HEAD")
        throw new Error(`${where}: documented without a body, got ${exchange.text.slice(0, 200)}`);
      return;
    }
    if (method === "HEAD") return;
    const types = Object.keys(response.content);
    const type = types.find((t) => t === contentType || t === "*/*");
    if (type === undefined)
      throw new Error(`${where}: content type ${contentType} is not documented (${types.join(", ")})`);
    this.expectValid(`${at}/content/${escape(type)}/schema`, body, where);
    this.expectContract(response.content[type].schema, body, where);
  }

  /**
   * Hold a JSON answer to the zod schema of its contract (src/contracts/) as well: the
   * document is generated from it, but zod also checks what JSON Schema cannot say (a
   * refinement) and is what the agent client's types are inferred from.
   */
  private expectContract(schema: Json, body: unknown, where: string): void {
    const name = /^#\/components\/schemas\/(\w+)$/.exec(schema.$ref ?? "")?.[1];
    if (name === undefined || !(name in ANSWERS)) return;
    const parsed = ANSWERS[name as keyof typeof ANSWERS].safeParse(body);
    if (!parsed.success)
      throw new Error(
        `${where}: the body does not match its contract (${name}): ${parsed.error.message}\n` +
          `body: ${JSON.stringify(body).slice(0, 1000)}`,
      );
  }

  private expectValid(pointer: string, body: unknown, where: string): void {
    const validate = this.validator(pointer);
    if (!validate(body))
      throw new Error(
        `${where}: the body does not match the document (${pointer}):\n` +
          `${this.ajv.errorsText(validate.errors, { separator: "\n" })}\nbody: ${JSON.stringify(body).slice(0, 1000)}`,
      );
  }
}

/** `schema` with its references to the document's components pointed at the bundle of them. */
function bundled(schema: unknown): any {
  if (Array.isArray(schema)) return schema.map(bundled);
  if (schema === null || typeof schema !== "object") return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [
      key,
      key === "$ref" && typeof value === "string"
        ? value.replace("#/components/schemas/", `${BASE}#/$defs/`)
        : bundled(value),
    ]),
  );
}

/** A JSON pointer segment. */
const escape = (segment: string) => segment.replace(/~/g, "~0").replace(/\//g, "~1");

let shared: ApiContract | undefined;

/** The contract every API test's answers are checked against (one per test process). */
export function apiContract(): ApiContract {
  shared ??= new ApiContract();
  return shared;
}

/** Read a fetch answer whole and check it against the document; answers its text. */
export async function checkedText(method: string, url: string, res: Response): Promise<string> {
  const text = await res.text();
  checkReceived(method, url, res, text);
  return text;
}

/**
 * Read the start of an answer that does not end by itself (an event stream) until
 * `enough` says so, or it ends; stop reading (the connection closes) and check the answer
 * with what was read as its body. Answers the text read.
 */
export async function checkedStart(
  method: string,
  url: string,
  res: Response,
  enough: (text: string) => boolean,
): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!enough(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  await reader.cancel();
  checkReceived(method, url, res, text);
  return text;
}

function checkReceived(method: string, url: string, res: Response, text: string): void {
  const { pathname, search } = new URL(url);
  apiContract().check({
    method,
    url: `${pathname}${search}`,
    status: res.status,
    headers: res.headers,
    text,
  });
}
