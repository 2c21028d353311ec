import { ConfigError } from "../runtime/config.js";
import { logger } from "../runtime/log.js";

/**
 * How the bridge's own calls to Ironic authenticate: the headers to send, and what to do
 * when Ironic refuses them (401). The fenced endpoint never uses one: it forwards the
 * caller's own headers and adds nothing.
 */
export interface IronicAuth {
  /** what the calls are made as, for logs (never the secret) */
  readonly describe: string;
  /** headers for the next call; waiting for them ends when `signal` aborts */
  headers(signal?: AbortSignal): Promise<Record<string, string>>;
  /**
   * Ironic answered 401 to a call made with `sent` (what `headers` gave): drop that
   * credential. True when a fresh one may differ, so the call is worth one more try.
   */
  refused(sent: Record<string, string>): boolean;
}

/** No credential (Ironic with `auth_strategy = noauth`), or one fixed token (`SHARDBRIDGE_IRONIC_TOKEN`). */
export function staticAuth(token?: string): IronicAuth {
  const headers: Record<string, string> = token === undefined ? {} : { "x-auth-token": token };
  return {
    describe: token === undefined ? "noauth" : "a fixed token (SHARDBRIDGE_IRONIC_TOKEN)",
    headers: async () => headers,
    refused: () => false,
  };
}

/** Keystone v3 credentials, as the standard `OS_*` environment gives them. */
export type KeystoneCredentials = {
  /** OS_AUTH_URL, with or without its /v3 */
  authUrl: string;
} & (
  | {
      method: "password";
      /** OS_USERNAME, or OS_USER_ID */
      user: { name: string; domain: DomainRef } | { id: string };
      password: string;
      /** OS_PROJECT_NAME/OS_PROJECT_ID, or OS_SYSTEM_SCOPE=all */
      scope: { project: { name: string; domain: DomainRef } | { id: string } } | { system: "all" };
    }
  | {
      /** scoped by the credential itself: its project and roles */
      method: "application_credential";
      credential:
        { id: string } | { name: string; user: { name: string; domain: DomainRef } | { id: string } };
      secret: string;
    }
);

type DomainRef = { name: string } | { id: string };

/**
 * The Keystone credentials in `env` (OS_AUTH_URL and the rest, as openstack's clients read
 * them), or null when OS_AUTH_URL is unset. An application credential
 * (OS_APPLICATION_CREDENTIAL_ID or _NAME, and _SECRET) is used when given, else a
 * password. Incomplete or contradictory settings are a ConfigError naming what is missing.
 */
export function keystoneCredentialsFromEnv(env: NodeJS.ProcessEnv): KeystoneCredentials | null {
  const get = (name: string) => {
    const value = env[name]?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  const authUrl = get("OS_AUTH_URL");
  if (authUrl === undefined) return null;
  if (!/^https?:\/\//.test(authUrl)) throw new ConfigError(`OS_AUTH_URL must be an http(s) URL: ${authUrl}`);
  const type = get("OS_AUTH_TYPE")?.toLowerCase().replace(/^v3/, "");
  const domain = (kind: "USER" | "PROJECT"): DomainRef => {
    const id = get(`OS_${kind}_DOMAIN_ID`);
    if (id !== undefined) return { id };
    const name = get(`OS_${kind}_DOMAIN_NAME`) ?? get("OS_DOMAIN_NAME");
    if (name !== undefined) return { name };
    const fallback = get("OS_DOMAIN_ID");
    if (fallback !== undefined) return { id: fallback };
    throw new ConfigError(`OS_${kind}_DOMAIN_NAME (or OS_${kind}_DOMAIN_ID) is needed with OS_AUTH_URL`);
  };
  const user = () => {
    const id = get("OS_USER_ID");
    if (id !== undefined) return { id };
    const name = get("OS_USERNAME");
    if (name === undefined) throw new ConfigError("OS_USERNAME (or OS_USER_ID) is needed with OS_AUTH_URL");
    return { name, domain: domain("USER") };
  };
  const credentialId = get("OS_APPLICATION_CREDENTIAL_ID");
  const credentialName = get("OS_APPLICATION_CREDENTIAL_NAME");
  const applicationCredential =
    type === "applicationcredential" ||
    (type === undefined && (credentialId !== undefined || credentialName !== undefined));
  if (applicationCredential) {
    const secret = get("OS_APPLICATION_CREDENTIAL_SECRET");
    if (secret === undefined) throw new ConfigError("OS_APPLICATION_CREDENTIAL_SECRET is needed");
    if (credentialId === undefined && credentialName === undefined)
      throw new ConfigError("OS_APPLICATION_CREDENTIAL_ID (or _NAME with OS_USERNAME) is needed");
    return {
      authUrl,
      method: "application_credential",
      credential: credentialId !== undefined ? { id: credentialId } : { name: credentialName!, user: user() },
      secret,
    };
  }
  if (type !== undefined && type !== "password")
    throw new ConfigError(
      `OS_AUTH_TYPE ${env.OS_AUTH_TYPE}: the bridge authenticates with password or v3applicationcredential`,
    );
  const password = get("OS_PASSWORD");
  if (password === undefined) throw new ConfigError("OS_PASSWORD is needed with OS_AUTH_URL and OS_USERNAME");
  const projectId = get("OS_PROJECT_ID") ?? get("OS_TENANT_ID");
  const projectName = get("OS_PROJECT_NAME") ?? get("OS_TENANT_NAME");
  const system = get("OS_SYSTEM_SCOPE");
  if (system !== undefined && (projectId !== undefined || projectName !== undefined))
    throw new ConfigError("OS_SYSTEM_SCOPE and OS_PROJECT_NAME/OS_PROJECT_ID: set one scope, not both");
  if (system !== undefined && system !== "all")
    throw new ConfigError(`OS_SYSTEM_SCOPE: only "all" is a system scope (${system})`);
  let scope: Extract<KeystoneCredentials, { method: "password" }>["scope"];
  if (system !== undefined) scope = { system: "all" };
  else if (projectId !== undefined) scope = { project: { id: projectId } };
  else if (projectName !== undefined) scope = { project: { name: projectName, domain: domain("PROJECT") } };
  else
    throw new ConfigError(
      "OS_PROJECT_NAME (or OS_PROJECT_ID, or OS_SYSTEM_SCOPE=all) is needed: Ironic takes scoped tokens only",
    );
  return { authUrl, method: "password", user: user(), password, scope };
}

/** The body of `POST /v3/auth/tokens` for `credentials`. */
export function tokenRequest(credentials: KeystoneCredentials): unknown {
  if (credentials.method === "application_credential")
    return {
      auth: {
        identity: {
          methods: ["application_credential"],
          application_credential: { ...credentials.credential, secret: credentials.secret },
        },
      },
    };
  return {
    auth: {
      identity: {
        methods: ["password"],
        password: { user: { ...credentials.user, password: credentials.password } },
      },
      scope: "system" in credentials.scope ? { system: { all: true } } : credentials.scope,
    },
  };
}

/** `{OS_AUTH_URL}/auth/tokens`, whether OS_AUTH_URL names /v3 or the bare service. */
export function tokensUrl(authUrl: string): string {
  const base = authUrl.replace(/\/+$/, "");
  return `${/\/v3$/.test(base) ? base : `${base}/v3`}/auth/tokens?nocatalog`;
}

/** A token as the bridge keeps it: when to get the next one is in the bridge's own clock. */
export interface HeldToken {
  token: string;
  /** Keystone's expires_at, as it said it (for logs) */
  expiresAt: string;
  /** when to get a new one, in ms of the clock the auth was given */
  renewAt: number;
}

/** At most this long before a token's end is it renewed (keystoneauth: 2 minutes before, by the local clock). */
export const RENEW_BEFORE_MS = 5 * 60_000;

/**
 * When a token must be renewed, in the clock of `requestedAt` (the moment the request for
 * it was sent, so its time in flight only brings renewal earlier). The token's life is read
 * from Keystone's own `issued_at` and `expires_at`, both in Keystone's clock, so a bridge
 * whose clock is off by minutes still renews in time. Renewed at the earlier of 5 minutes
 * before its end and half-way through its life (a token of a few minutes, as a test sets).
 */
export function renewAt(issuedAt: string, expiresAt: string, requestedAt: number): number {
  const lifeMs = Date.parse(expiresAt) - Date.parse(issuedAt);
  if (!Number.isFinite(lifeMs) || lifeMs <= 0) return requestedAt;
  return requestedAt + lifeMs - Math.min(RENEW_BEFORE_MS, lifeMs / 2);
}

/** Whether the token held at `now` (same clock as its renewAt) is still to be used. */
export function isFresh(held: HeldToken | null, now: number): held is HeldToken {
  return held !== null && now < held.renewAt;
}

export class KeystoneError extends Error {
  constructor(
    readonly status: number,
    detail: string,
  ) {
    super(`Keystone answered ${status}: ${detail}`);
    this.name = "KeystoneError";
  }
}

export interface KeystoneAuthOptions {
  /** ms, monotonic: performance.now() by default */
  clock?: () => number;
  /** a token request's timeout, default 10 s */
  timeoutMs?: number;
}

/**
 * A Keystone token for the bridge's own Ironic calls: got with `POST /v3/auth/tokens`,
 * kept and used until `renewAt` (before its `expires_at`), then got anew; one request at a
 * time however many calls wait for it. A token Ironic refuses (401: revoked, or Keystone's
 * keys rotated) is dropped, and the call is tried once more with a new one.
 */
export class KeystoneAuth implements IronicAuth {
  readonly describe: string;
  private held: HeldToken | null = null;
  private pending: Promise<HeldToken> | null = null;
  private readonly clock: () => number;
  private readonly timeoutMs: number;
  /** tokens got from Keystone so far */
  issued = 0;

  constructor(
    private readonly credentials: KeystoneCredentials,
    options: KeystoneAuthOptions = {},
  ) {
    this.clock = options.clock ?? (() => performance.now());
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.describe =
      credentials.method === "application_credential"
        ? `keystone ${credentials.authUrl}, application credential ${"id" in credentials.credential ? credentials.credential.id : credentials.credential.name}`
        : `keystone ${credentials.authUrl}, user ${"name" in credentials.user ? credentials.user.name : credentials.user.id}`;
  }

  async headers(signal?: AbortSignal): Promise<Record<string, string>> {
    return { "x-auth-token": await this.token(signal) };
  }

  refused(sent: Record<string, string>): boolean {
    if (this.held !== null && this.held.token === sent["x-auth-token"]) this.held = null;
    return true;
  }

  /**
   * The token to use now: the one held while fresh, else a new one (one request to
   * Keystone however many wait; a waiter whose `signal` aborts stops waiting, the request
   * goes on for the others).
   */
  async token(signal?: AbortSignal): Promise<string> {
    if (isFresh(this.held, this.clock())) return this.held.token;
    if (this.pending === null) {
      this.pending = this.issue().finally(() => {
        this.pending = null;
      });
      // Every waiter may have stopped waiting: a failure is theirs to hear, never unhandled.
      this.pending.catch(() => undefined);
    }
    if (signal === undefined) return (await this.pending).token;
    signal.throwIfAborted();
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return (await Promise.race([this.pending, aborted])).token;
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  private async issue(): Promise<HeldToken> {
    const requestedAt = this.clock();
    const res = await fetch(tokensUrl(this.credentials.authUrl), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify(tokenRequest(this.credentials)),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    if (res.status !== 201) throw new KeystoneError(res.status, keystoneMessage(text));
    const token = res.headers.get("x-subject-token");
    const body = JSON.parse(text) as {
      token?: {
        issued_at?: string;
        expires_at?: string;
        user?: { name?: string };
        project?: { name?: string };
      };
    };
    const issuedAt = body.token?.issued_at;
    const expiresAt = body.token?.expires_at;
    if (token === null || issuedAt === undefined || expiresAt === undefined)
      throw new KeystoneError(res.status, "no X-Subject-Token, issued_at or expires_at in the answer");
    this.held = { token, expiresAt, renewAt: renewAt(issuedAt, expiresAt, requestedAt) };
    this.issued++;
    logger.info("keystone-token-issued", {
      user: body.token?.user?.name,
      project: body.token?.project?.name,
      expires_at: expiresAt,
      renew_in_s: Math.round((this.held.renewAt - this.clock()) / 1000),
    });
    return this.held;
  }
}

/** Keystone's error shape: {"error": {"code", "title", "message"}}. */
function keystoneMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: string; title?: string } };
    return body.error?.message ?? body.error?.title ?? text.slice(0, 500);
  } catch {
    return text.slice(0, 500);
  }
}

/**
 * The auth of the bridge's own Ironic calls, from the environment: Keystone with the
 * standard `OS_*` variables when OS_AUTH_URL is set, else SHARDBRIDGE_IRONIC_TOKEN as a
 * fixed token, else none (noauth). Both at once is a ConfigError: which one is meant?
 */
export function ironicAuthFromEnv(env: NodeJS.ProcessEnv = process.env): IronicAuth {
  const credentials = keystoneCredentialsFromEnv(env);
  const token = env.SHARDBRIDGE_IRONIC_TOKEN?.trim() || undefined;
  if (credentials !== null && token !== undefined)
    throw new ConfigError(
      "both OS_AUTH_URL (Keystone) and SHARDBRIDGE_IRONIC_TOKEN (a fixed token) are set: unset one",
    );
  return credentials !== null ? new KeystoneAuth(credentials) : staticAuth(token);
}
