import { DeclaredRoutes } from "../http/declared-routes.js";
import { readFileSync } from "node:fs";
import type { Request, RequestHandler, Response } from "express";
import { LoginForm, StaticPath } from "../../contracts/ui.js";
import { parseOrThrow } from "../../core/validation.js";
import { PAGE_ROLES, type TokenAuthority } from "../http/auth.js";
import { mediaTypeOf, readRequestBody } from "../http/body.js";
import { HttpError } from "../http/errors.js";
import { bodyPolicyOf, LOGIN_FORM_BODY } from "../http/limits.js";
import type { StatusWatcher } from "./status-watcher.js";
import type { JsonSchema } from "../openapi/schemas.js";
import type { Media, Operation, RefusalAnswer, Success } from "../openapi/operation.js";

/*
 * The status page: GET /ui (the page, or a redirect to the login), /ui/login (a form that
 * takes a viewer's or admin's token and sets a session cookie), /ui/logout, /ui/events
 * (the page's data, as server-sent events) and /ui/static/* (its script and style, files
 * of the package). No page holds data or script built from a request: the HTML is fixed,
 * the data comes only from /ui/events, and the Content-Security-Policy allows scripts and
 * styles from these files alone.
 */

/** The session cookie: HttpOnly (no script reads it), SameSite=Strict, for /ui only. */
export const SESSION_COOKIE = "shardbridge_page";
/** How long a login lasts. */
export const SESSION_MS = 12 * 3600 * 1000;
/** How long a page waits to reconnect after a lost connection (the bridge restarting): the stream's first field. */
export const RECONNECT_MS = 2000;
/** Open pages per bridge; more are refused (503) rather than each costing a socket and its writes. */
export const MAX_VIEWERS = 64;
/**
 * Open pages one token's sessions may hold at once (a person's tabs and screens): so one
 * session — a script that opens streams in a loop — cannot take every place of MAX_VIEWERS
 * and turn the next operator's page away.
 */
export const MAX_PAGES_PER_SESSION = 8;

/** Every /ui answer's Content-Security-Policy: scripts, styles and images of the page's own files only. */
export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

/** The page's files (GET /ui/static/{file}) and the type each is served as. */
export const STATIC_TYPES: Record<string, string> = {
  "status.js": "text/javascript; charset=utf-8",
  "page.css": "text/css; charset=utf-8",
  "icon.svg": "image/svg+xml",
};

/** The page's files, read once: they ship beside this module (npm run build copies them). */
function readStatic(): { html: Record<"status" | "login", string>; assets: Map<string, Buffer> } {
  const dir = new URL("./static/", import.meta.url);
  const read = (name: string) => readFileSync(new URL(name, dir));
  return {
    html: { status: read("status.html").toString("utf8"), login: read("login.html").toString("utf8") },
    assets: new Map(Object.keys(STATIC_TYPES).map((name) => [name, read(name)])),
  };
}

function secureHeaders(res: Response): void {
  res.set({
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
  });
}

/** One cookie's value from the Cookie header. */
function cookie(req: Request, name: string): string | undefined {
  for (const part of (req.get("cookie") ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * A POST from a page of another origin (a browser says where it comes from): refused.
 * `Origin: null` too: a browser sends it from a sandboxed frame, a file:// page or after a
 * redirect that hid where the form came from — never from the bridge's own page. A client
 * that is no browser sends no Origin and is let through (its token is what counts).
 */
function assertSameOrigin(req: Request): void {
  const origin = req.get("origin");
  if (origin === undefined) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    host = "";
  }
  // Behind a proxy that rewrites Host, the host the browser used is in X-Forwarded-Host.
  if (host !== req.get("host") && host !== req.get("x-forwarded-host"))
    throw new HttpError([
      {
        status: 403,
        code: "shardbridge.auth.forbidden",
        title: "Forbidden",
        detail: `a form from ${origin} may not post to this bridge`,
      },
    ]);
}

/**
 * A 303 to `path`, without the short HTML or text body express's redirect writes: a
 * browser follows the Location and shows nothing of it.
 */
function seeOther(res: Response, path: string): void {
  res.status(303).set("location", path).end();
}

/** A page of the status page: fixed HTML (each starts so), never data of the request. */
const HTML: Media = { type: "text/html", schema: { type: "string", pattern: "^<!doctype html>" } };
/** The login form again, with a sentence of the bridge's own above it, and no cookie set. */
const FORM_AGAIN = (why: string): RefusalAnswer => ({
  description: `${why}: the login form again`,
  content: [HTML],
});
/** A 303 to `to` (no body), with other headers of its own. */
const seeOtherAnswer = (
  to: string,
  description: string,
  headers: Record<string, JsonSchema> = {},
): Success => ({
  description,
  headers: {
    Location: { description: `\`${to}\``, required: true, schema: { const: to } },
    ...headers,
  },
});

/** The status page's operations, as the document lists them (operations.ts). */
export const PAGE_OPERATIONS = {
  statusPage: {
    method: "get",
    path: "/ui",
    id: "statusPage",
    tag: "status page",
    summary: "The status page, or a redirect to its login",
    description:
      "Fixed HTML with no data in it: the page's script fills it from `GET /ui/events`, and the Content-Security-Policy allows scripts and styles from the page's own files only.",
    access: { kind: "page", session: "optional" },
    answers: {
      200: { description: "the page", content: [HTML] },
      303: seeOtherAnswer("/ui/login", "no session (none, lapsed, or forged): to the login form"),
    },
    store: false,
  },
  loginForm: {
    method: "get",
    path: "/ui/login",
    id: "loginForm",
    tag: "status page",
    summary: "The login form",
    access: { kind: "page", session: "none" },
    answers: { 200: { description: "the form: one field, `token`", content: [HTML] } },
    store: false,
  },
  logIn: {
    method: "post",
    path: "/ui/login",
    id: "logIn",
    tag: "status page",
    summary: "Log in with a viewer's or admin's token: a session cookie for the page",
    description: `The cookie holds no token: \`<id>.<expiry>.<HMAC-SHA256 of both under a key derived from the token>\`, so it opens the page and nothing else (the API answers it as no credentials), lapses after ${SESSION_MS / 3_600_000} hours, is accepted by every bridge with the same tokens file, and stops working when its token leaves the file. Tokens of the roles ${PAGE_ROLES.map((r) => `\`${r}\``).join(" and ")} open the page. A refusal is the form again (HTML, no cookie), but for a cross-origin post and a body that is not read (JSON, as the API refuses).`,
    access: { kind: "page", session: "none" },
    form: "LoginForm",
    bodyPolicy: LOGIN_FORM_BODY,
    answers: {
      303: seeOtherAnswer("/ui", "logged in: the session cookie, and to the page", {
        "Set-Cookie": { $ref: "#/components/headers/SetPageSession" },
      }),
      400: FORM_AGAIN("no token given"),
      401: FORM_AGAIN("a token this bridge does not know"),
      403: FORM_AGAIN("an agent's or the inspector's token (the page is not theirs)"),
      415: { description: "a body that is not a form", codes: ["body.invalid"] },
    },
    store: false,
  },
  logOut: {
    method: "post",
    path: "/ui/logout",
    id: "logOut",
    tag: "status page",
    summary: "Log out: the session cookie cleared",
    description:
      "Clears the cookie in this browser. Nothing is stored to revoke, so a copy of the cookie taken elsewhere lasts until its expiry; taking its token out of the tokens file ends every session of that token.",
    access: { kind: "page", session: "none" },
    answers: {
      303: seeOtherAnswer("/ui/login", "the cookie cleared, and to the login form", {
        "Set-Cookie": { $ref: "#/components/headers/ClearPageSession" },
      }),
    },
    store: false,
  },
  pageFile: {
    method: "get",
    path: "/ui/static/{file}",
    id: "pageFile",
    tag: "status page",
    summary: "One of the page's files: its script, style and icon",
    description: "Files of this build, revalidated on each use (`Cache-Control: no-cache`).",
    access: { kind: "page", session: "none" },
    parameters: ["file"],
    answers: {
      200: {
        description: "the file",
        content: [...new Set(Object.values(STATIC_TYPES).map((type) => type.split(";")[0]!))].map((type) => ({
          type,
          schema: { type: "string" },
        })),
      },
      404: { description: "a well-formed name the page has no file of", codes: ["route.not_found"] },
    },
    store: false,
  },
  pageEvents: {
    method: "get",
    path: "/ui/events",
    id: "pageEvents",
    tag: "status page",
    summary: "The page's data, as server-sent events, while the session lasts",
    description: `Starts with \`retry: ${RECONNECT_MS}\` (reconnect ${RECONNECT_MS / 1000} s after a lost connection), then events named \`history\` (the last transitions), \`transition\`, \`snapshot\` (every look at the store, 500 ms or less often for a large fleet) and \`trouble\` (a look failed), each \`data\` one JSON object: docs/API.md lists their fields. Never a fencing token. The stream ends when the session lapses; the page's reconnect is then refused (401).`,
    access: { kind: "page", session: "required" },
    answers: {
      200: {
        description: "the event stream",
        content: [
          { type: "text/event-stream", schema: { type: "string", pattern: `^retry: ${RECONNECT_MS}\n\n` } },
        ],
      },
      429: {
        description: `this login's token has ${MAX_PAGES_PER_SESSION} pages open already`,
        codes: ["ui.too_many_pages"],
      },
      503: {
        description: `${MAX_VIEWERS} pages are open on this bridge already`,
        codes: ["ui.too_many_viewers"],
      },
    },
    store: false,
  },
} satisfies Record<string, Operation>;

const FORM_TYPE = "application/x-www-form-urlencoded";

/**
 * The login form's fields, read as every body of the API is (its declared limit: a 413
 * before a byte is read when Content-Length says more; a 415 for an encoding or charset
 * other than UTF-8 as it is), and a 415 for a body that is not a form. No body: no fields.
 */
async function readForm(req: Request, res: Response): Promise<Record<string, string>> {
  const raw = await readRequestBody(req, res, bodyPolicyOf(PAGE_OPERATIONS.logIn).limit, "any");
  if (raw.length === 0) return {};
  if (mediaTypeOf(req.headers) !== FORM_TYPE)
    throw new HttpError([
      {
        status: 415,
        code: "shardbridge.body.invalid",
        title: "Body not accepted",
        detail: `send the login form as ${FORM_TYPE}`,
      },
    ]);
  return Object.fromEntries(new URLSearchParams(raw.toString("utf8")));
}

const escapeHtml = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** Every /ui answer, refusals and redirects included, carries the page's security headers. */
export const pageHeaders: RequestHandler = (req, res, next) => {
  if (req.path === "/ui" || req.path.startsWith("/ui/")) secureHeaders(res);
  next();
};

export function uiRoutes(
  authority: TokenAuthority,
  watcher: StatusWatcher,
): DeclaredRoutes & { close(): void } {
  const { html, assets } = readStatic();
  const routes = new DeclaredRoutes();
  const open = new Set<Response>();
  /** open pages per session id (one per token), for MAX_PAGES_PER_SESSION */
  const pagesOf = new Map<string, number>();
  const sessionOf = (req: Request) => authority.pageSession(cookie(req, SESSION_COOKIE), Date.now());
  const page = (res: Response, status: number, text: string) => {
    res.status(status).set("cache-control", "no-store").type("html").send(text);
  };
  /** The login form, with one of our own sentences above it (never request data). */
  const login = (res: Response, status: number, message?: string) =>
    page(
      res,
      status,
      html.login.replace(
        "<!--message-->",
        message === undefined ? "" : `<p class="error" role="alert">${escapeHtml(message)}</p>`,
      ),
    );

  routes.serve(PAGE_OPERATIONS.statusPage, (req, res) => {
    if (sessionOf(req) === null) return seeOther(res, "/ui/login");
    page(res, 200, html.status);
  });

  routes.serve(PAGE_OPERATIONS.loginForm, (_req, res) => login(res, 200));

  routes.serve(PAGE_OPERATIONS.logIn, async (req, res) => {
    assertSameOrigin(req);
    const form = LoginForm.safeParse(await readForm(req, res));
    if (!form.success) return login(res, 400, "Enter a viewer or admin token.");
    let value: string;
    try {
      value = authority.openPageSession(form.data.token, Date.now() + SESSION_MS);
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      const status = error.errors[0]!.status;
      return login(
        res,
        status,
        status === 401
          ? "That token is not known to this bridge."
          : `This page is for ${PAGE_ROLES.join(" and ")} tokens; an agent's or the inspector's token does not open it.`,
      );
    }
    // Secure where a TLS proxy in front says the page is served over https.
    const secure = req.get("x-forwarded-proto") === "https" ? "; Secure" : "";
    res.set(
      "set-cookie",
      `${SESSION_COOKIE}=${value}; Path=/ui; Max-Age=${SESSION_MS / 1000}; HttpOnly; SameSite=Strict${secure}`,
    );
    seeOther(res, "/ui");
  });

  routes.serve(PAGE_OPERATIONS.logOut, (req, res) => {
    assertSameOrigin(req);
    res.set("set-cookie", `${SESSION_COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict`);
    seeOther(res, "/ui/login");
  });

  routes.serve(PAGE_OPERATIONS.pageFile, (req, res) => {
    const { file } = parseOrThrow(StaticPath, req.params);
    const asset = assets.get(file);
    if (asset === undefined)
      throw new HttpError([
        { status: 404, code: "shardbridge.route.not_found", title: "No such file", detail: req.path },
      ]);
    // Files of this build: revalidated, so an upgraded bridge serves its own script.
    res.set({ "content-type": STATIC_TYPES[file]!, "cache-control": "no-cache" }).send(asset);
  });

  routes.serve(PAGE_OPERATIONS.pageEvents, (req, res) => {
    const session = sessionOf(req);
    if (session === null)
      throw new HttpError([
        {
          status: 401,
          code: "shardbridge.auth.unauthenticated",
          title: "Not authenticated",
          detail: "log in at /ui/login",
        },
      ]);
    const mine = pagesOf.get(session.id) ?? 0;
    if (mine >= MAX_PAGES_PER_SESSION)
      throw new HttpError([
        {
          status: 429,
          code: "shardbridge.ui.too_many_pages",
          title: "Too many open pages for this login",
          detail: `one token's sessions may hold at most ${MAX_PAGES_PER_SESSION} open status pages; close one`,
        },
      ]);
    if (watcher.viewerCount >= MAX_VIEWERS)
      throw new HttpError([
        {
          status: 503,
          code: "shardbridge.ui.too_many_viewers",
          title: "Too many open pages",
          detail: `this bridge serves at most ${MAX_VIEWERS} open status pages`,
        },
      ]);
    res.status(200).set({
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      // a proxy in front must pass each event on at once
      "x-accel-buffering": "no",
    });
    res.flushHeaders();
    res.write(`retry: ${RECONNECT_MS}\n\n`);
    open.add(res);
    watcher.add(res);
    pagesOf.set(session.id, mine + 1);
    // The session ends while the page is open: end the stream; the page's reconnect is refused (401).
    const expires = setTimeout(() => res.end(), Math.max(0, session.expiresMs - Date.now()));
    expires.unref();
    req.on("close", () => {
      clearTimeout(expires);
      open.delete(res);
      watcher.remove(res);
      const left = (pagesOf.get(session.id) ?? 1) - 1;
      if (left > 0) pagesOf.set(session.id, left);
      else pagesOf.delete(session.id);
    });
  });

  return Object.assign(routes, {
    /** End every open page's stream and stop looking: the bridge is shutting down. */
    close() {
      watcher.close();
      for (const res of open) res.end();
    },
  });
}
