import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KeystoneAuth, type KeystoneCredentials } from "../../../src/upstream/keystone.js";
import { answers, conf, setUp } from "./conf.js";
import type { TestDatabases } from "./mariadb.js";
import type { Service } from "./service.js";
import { openstackBin } from "./venv.js";
import { serveWsgi } from "./wsgi.js";

/** The service users the cloud makes, as operators do: each with the `service` role in project `service`. */
export const SERVICE_USERS = ["nova", "ironic", "placement", "glance", "neutron", "shardbridge"] as const;
export type ServiceUser = (typeof SERVICE_USERS)[number];

/** The catalog's services, by type: the name each is registered under. */
const CATALOG_NAMES = {
  baremetal: "ironic",
  placement: "placement",
  image: "glance",
  network: "neutron",
  compute: "nova",
} as const;
/** Where each service of the catalog answers (a cloud that boots no instance has no image, network or compute). */
export type CatalogEndpoints = { baremetal: string; placement: string } & Partial<
  Record<keyof typeof CATALOG_NAMES, string>
>;

const REGION = "RegionOne";

export interface KeystoneOptions {
  /** its folder: keystone.conf, key repositories, logs */
  dir: string;
  port: number;
  /** where its database is made (`<prefix>_keystone`) */
  databases: TestDatabases;
  /** `[token] expiration`, seconds (keystone's default 3600) */
  tokenExpirationS?: number;
}

/** A Fernet key as keystone-manage fernet_setup and credential_setup write one: 32 random bytes, url-safe base64. */
const fernetKey = () => randomBytes(32).toString("base64url") + "=";

/**
 * keystone 30 (PyPI) on its own MariaDB database, served by cheroot: Fernet tokens, the
 * admin of `keystone-manage bootstrap` (admin role on project admin and on the system),
 * the identity service in the catalog. `start` makes it and waits until it answers;
 * `populate` then adds what a cloud's services need.
 */
export class Keystone {
  /** the root of the identity API (OS_AUTH_URL is this and /v3) */
  readonly url: string;
  /** the bootstrap admin's and the service users' passwords (the users are made by `populate`) */
  readonly passwords: ReadonlyMap<string, string>;
  /** its process, once `start` has begun it */
  service: Service | null = null;
  private readonly admins = new Map<"system" | "project", KeystoneAuth>();
  private projectId = "";
  private readonly userIds = new Map<string, string>();

  /** Its folder, configuration and keys; the passwords the other services' files name. Not started. */
  constructor(private readonly options: KeystoneOptions) {
    const { dir, databases, tokenExpirationS } = options;
    this.url = `http://127.0.0.1:${options.port}`;
    this.passwords = new Map(["admin", ...SERVICE_USERS].map((u) => [u, randomBytes(12).toString("hex")]));
    mkdirSync(join(dir, "fernet-keys"), { recursive: true, mode: 0o700 });
    mkdirSync(join(dir, "credential-keys"), { mode: 0o700 });
    // Key 0 is the staged key, the highest the primary: what fernet_setup and credential_setup
    // write, without two more Python starts (2-4 s each on this machine).
    for (const repository of ["fernet-keys", "credential-keys"])
      for (const key of ["0", "1"]) writeFileSync(join(dir, repository, key), fernetKey(), { mode: 0o600 });
    writeFileSync(
      join(dir, "keystone.conf"),
      conf({
        DEFAULT: { log_file: join(dir, "keystone.log") },
        database: { connection: databases.create("keystone") },
        fernet_tokens: { key_repository: join(dir, "fernet-keys") },
        fernet_receipts: { key_repository: join(dir, "fernet-keys") },
        credential: { key_repository: join(dir, "credential-keys") },
        // bcrypt's least cost: a password check takes ~1 ms instead of ~250 (cost 12), for a
        // suite whose services log in often; what it stores is the same kind of hash.
        identity: { password_hash_rounds: 4 },
        ...(tokenExpirationS !== undefined && { token: { expiration: tokenExpirationS } }),
      }),
    );
  }

  get authUrl(): string {
    return `${this.url}/v3`;
  }

  /** db_sync, bootstrap (admin, roles, the identity endpoints), and serve; until it answers. */
  async start(): Promise<void> {
    const { dir, port } = this.options;
    const manage = (args: string[]) =>
      setUp(
        `keystone-manage ${args[0]}`,
        openstackBin("keystone-manage"),
        ["--config-file", join(dir, "keystone.conf"), ...args],
        join(dir, "manage.log"),
      );
    await manage(["db_sync"]);
    await manage([
      "bootstrap",
      ...["--bootstrap-password", this.passwords.get("admin")!],
      ...["--bootstrap-admin-url", this.authUrl, "--bootstrap-public-url", this.authUrl],
      ...["--bootstrap-internal-url", this.authUrl, "--bootstrap-region-id", REGION],
    ]);
    // Started only after bootstrap: of the starts that overlapped the two, one refused the
    // admin's first calls (403 on GET /v3/roles); 2-3 s is not worth a flaky start.
    this.service = serveWsgi("keystone", "keystone.wsgi.api", port, join(dir, "out.log"), {
      OS_KEYSTONE_CONFIG_DIR: dir,
    });
    await this.service.until(() => answers(this.authUrl), 60_000);
  }

  /** Credentials of `user` (password, project `service`, or the admin's `admin` or the system). */
  credentials(
    user: string,
    scope: "system" | "project" = "project",
  ): Extract<KeystoneCredentials, { method: "password" }> {
    const project = user === "admin" ? "admin" : "service";
    return {
      authUrl: this.authUrl,
      method: "password",
      user: { name: user, domain: { name: "Default" } },
      password: this.passwords.get(user)!,
      scope:
        scope === "system" ? { system: "all" } : { project: { name: project, domain: { name: "Default" } } },
    };
  }

  /**
   * The admin's openrc: the OS_* variables an operator sources before calling OpenStack, on
   * project admin, or system-scoped (Ironic's admin: writing shard keys).
   */
  adminOpenrc(scope: "project" | "system" = "project"): Record<string, string> {
    const user = {
      OS_AUTH_URL: this.authUrl,
      OS_USERNAME: "admin",
      OS_PASSWORD: this.passwords.get("admin")!,
      OS_USER_DOMAIN_NAME: "Default",
    };
    return scope === "system"
      ? { ...user, OS_SYSTEM_SCOPE: "all" }
      : { ...user, OS_PROJECT_NAME: "admin", OS_PROJECT_DOMAIN_NAME: "Default" };
  }

  /** The bootstrap admin's token, kept and renewed: system-scoped (Ironic's admin) or on project admin (placement's). */
  async adminToken(scope: "system" | "project"): Promise<string> {
    let auth = this.admins.get(scope);
    if (auth === undefined)
      this.admins.set(scope, (auth = new KeystoneAuth(this.credentials("admin", scope))));
    return auth.token();
  }

  /** An identity API call as the system admin; its JSON. */
  async api(method: string, path: string, body?: unknown): Promise<any> {
    const res = await fetch(`${this.authUrl}${path}`, {
      method,
      headers: { "x-auth-token": await this.adminToken("system"), "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok)
      throw new Error(
        `keystone ${method} ${path}: ${res.status} ${text}` +
          (res.status >= 500 || res.status === 403 ? this.lastError() : ""),
      );
    return text === "" ? null : JSON.parse(text);
  }

  /**
   * Why keystone answered 5xx or 403, from its own log (which goes with the cloud): its last
   * ERROR or WARNING line (a refusal is a WARNING) and the log's last line (a traceback's
   * exception), short, since the reporter keeps 1,500 characters of a failure.
   */
  private lastError(): string {
    let lines: string[];
    try {
      lines = readFileSync(join(this.options.dir, "keystone.log"), "utf8").trimEnd().split("\n");
    } catch {
      return "\nkeystone's log: (none)";
    }
    const error =
      [...lines].reverse().find((l) => / (ERROR|WARNING) /.test(l)) ?? "(no ERROR or WARNING line)";
    const last = lines.at(-1) ?? "";
    return (
      `\nkeystone's log: ${error.slice(0, 400)}` + (last === error ? "" : `\n  ... ${last.slice(0, 300)}`)
    );
  }

  /**
   * What a cloud's services need: project `service`, a user for each service with the
   * `service` role there, and the catalog's endpoints of `endpoints` (public and internal,
   * RegionOne).
   */
  async populate(endpoints: CatalogEndpoints): Promise<void> {
    // One call alone first: keystone 30 makes its policy enforcer at the first call that
    // needs it, unlocked (RBACEnforcer._enforcer), and two threads doing that at once can
    // enforce with one whose rules are not registered yet: the 500 and the 403 that CI's
    // set-ups met on their first two calls, side by side.
    const { roles } = await this.api("GET", "/roles?name=service");
    // Then independent calls side by side (keystone serves 4 at once): ~20 calls one after
    // another took 3.5 s here.
    const { project } = await this.api("POST", "/projects", {
      project: { name: "service", domain_id: "default", description: "the services' users" },
    });
    this.projectId = project.id;
    const role = roles[0].id as string;
    const users = SERVICE_USERS.map(async (name) => {
      const { user } = await this.api("POST", "/users", {
        user: { name, domain_id: "default", password: this.passwords.get(name) },
      });
      this.userIds.set(name, user.id);
      await this.api("PUT", `/projects/${this.projectId}/users/${user.id}/roles/${role}`);
    });
    const catalog = Object.entries(endpoints).map(async ([type, url]) => {
      const name = CATALOG_NAMES[type as keyof typeof CATALOG_NAMES];
      const { service } = await this.api("POST", "/services", { service: { type, name } });
      await Promise.all(
        ["public", "internal"].map((iface) =>
          this.api("POST", "/endpoints", {
            endpoint: { service_id: service.id, interface: iface, url, region_id: REGION },
          }),
        ),
      );
    });
    await Promise.all([...users, ...catalog]);
  }

  /** `[keystone_authtoken]` of a service that validates tokens as `user` (keystonemiddleware, its in-process cache). */
  authtoken(user: ServiceUser): Record<string, string> {
    return {
      www_authenticate_uri: this.authUrl,
      ...this.passwordAuth(user),
    };
  }

  /** keystoneauth's password options for `user` on project `service` (nova's [placement], [ironic]). */
  passwordAuth(user: ServiceUser): Record<string, string> {
    return {
      auth_type: "password",
      auth_url: this.authUrl,
      username: user,
      password: this.passwords.get(user)!,
      user_domain_name: "Default",
      project_name: "service",
      project_domain_name: "Default",
      region_name: REGION,
    };
  }

  /**
   * An application credential of `user`'s own (made with its own token, as keystone
   * requires), on project `service` with its roles: the OS_* environment that names it.
   */
  async applicationCredential(user: ServiceUser, name: string): Promise<Record<string, string>> {
    const token = await new KeystoneAuth(this.credentials(user)).token();
    const res = await fetch(`${this.authUrl}/users/${this.userIds.get(user)}/application_credentials`, {
      method: "POST",
      headers: { "x-auth-token": token, "content-type": "application/json" },
      body: JSON.stringify({ application_credential: { name } }),
    });
    if (res.status !== 201) throw new Error(`application credential: ${res.status} ${await res.text()}`);
    const { application_credential: made } = (await res.json()) as {
      application_credential: { id: string; secret: string };
    };
    return {
      OS_AUTH_URL: this.authUrl,
      OS_AUTH_TYPE: "v3applicationcredential",
      OS_APPLICATION_CREDENTIAL_ID: made.id,
      OS_APPLICATION_CREDENTIAL_SECRET: made.secret,
    };
  }

  /** Revoke `token` (DELETE /v3/auth/tokens as the system admin): keystone refuses it from now on. */
  async revoke(token: string): Promise<void> {
    const res = await fetch(`${this.authUrl}/auth/tokens`, {
      method: "DELETE",
      headers: { "x-auth-token": await this.adminToken("system"), "x-subject-token": token },
    });
    if (res.status !== 204) throw new Error(`keystone token revocation: ${res.status} ${await res.text()}`);
  }

  /** What keystone says of `token` (GET /v3/auth/tokens as the system admin): its user and project, or null if invalid. */
  async whose(token: string): Promise<{ user: string; project: string | null } | null> {
    const res = await fetch(`${this.authUrl}/auth/tokens?nocatalog`, {
      headers: { "x-auth-token": await this.adminToken("system"), "x-subject-token": token },
    });
    if (res.status === 404 || res.status === 401) return null;
    if (!res.ok) throw new Error(`keystone token validation: ${res.status} ${await res.text()}`);
    const { token: t } = (await res.json()) as {
      token: { user: { name: string }; project?: { name: string } };
    };
    return { user: t.user.name, project: t.project?.name ?? null };
  }
}
