import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/runtime/config.js";
import { IronicClient, IronicError } from "../../src/upstream/ironic-client.js";
import {
  ironicAuthFromEnv,
  isFresh,
  KeystoneAuth,
  keystoneCredentialsFromEnv,
  KeystoneError,
  renewAt,
  RENEW_BEFORE_MS,
  tokenRequest,
  staticAuth,
  tokensUrl,
} from "../../src/upstream/keystone.js";
import { sharedCloud, type OpenStackCloud } from "../helpers/openstack/cloud.js";
import { Keystone } from "../helpers/openstack/keystone.js";
import { TestDatabases } from "../helpers/openstack/mariadb.js";
import { RecordingProxy } from "../helpers/openstack/recording-proxy.js";
import { freePort } from "../helpers/redis-server.js";

const AUTH_URL = "http://keystone.internal:5000/v3";
const PASSWORD_ENV = {
  OS_AUTH_URL: AUTH_URL,
  OS_USERNAME: "shardbridge",
  OS_PASSWORD: "pw",
  OS_PROJECT_NAME: "service",
  OS_USER_DOMAIN_NAME: "Default",
  OS_PROJECT_DOMAIN_NAME: "Default",
};

describe("the bridge's Keystone auth for Ironic: the pure parts", () => {
  it("renews at the earlier of 5 minutes before the end and half the token's life, from when it was asked for", () => {
    // Keystone's default 1 h token: 55 minutes after the request was sent.
    expect(renewAt("2026-12-04T04:00:00.000000Z", "2026-12-04T05:00:00.000000Z", 1000)).to.equal(
      1000 + 3_600_000 - RENEW_BEFORE_MS,
    );
    // A 60 s token: half-way.
    expect(renewAt("2026-12-04T04:00:00Z", "2026-12-04T04:01:00Z", 0)).to.equal(30_000);
    // Keystone's clock an hour off ours changes nothing: only the token's life is read.
    expect(renewAt("2020-01-01T00:00:00Z", "2020-01-01T01:00:00Z", 5)).to.equal(5 + 3_300_000);
    // A token with no life (or a date that does not parse) is renewed at once.
    expect(renewAt("2026-12-04T04:00:00Z", "2026-12-04T04:00:00Z", 7)).to.equal(7);
    expect(renewAt("garbage", "2026-12-04T04:00:00Z", 7)).to.equal(7);
  });

  it("uses a held token until its renewal time, not at or after it", () => {
    const held = { token: "t", expiresAt: "x", renewAt: 100 };
    expect(isFresh(held, 99.9)).to.equal(true);
    expect(isFresh(held, 100)).to.equal(false);
    expect(isFresh(null, 0)).to.equal(false);
  });

  it("reads the standard OS_* environment: password on a project, the system, an application credential", () => {
    expect(keystoneCredentialsFromEnv({})).to.equal(null);
    expect(keystoneCredentialsFromEnv(PASSWORD_ENV)).to.deep.equal({
      authUrl: AUTH_URL,
      method: "password",
      user: { name: "shardbridge", domain: { name: "Default" } },
      password: "pw",
      scope: { project: { name: "service", domain: { name: "Default" } } },
    });
    const system = keystoneCredentialsFromEnv({
      ...PASSWORD_ENV,
      OS_PROJECT_NAME: "",
      OS_SYSTEM_SCOPE: "all",
    })!;
    expect(tokenRequest(system)).to.deep.equal({
      auth: {
        identity: {
          methods: ["password"],
          password: { user: { name: "shardbridge", domain: { name: "Default" }, password: "pw" } },
        },
        scope: { system: { all: true } },
      },
    });
    // An application credential wins without OS_AUTH_TYPE, as openstackclient infers it.
    const credential = keystoneCredentialsFromEnv({
      OS_AUTH_URL: "http://keystone.internal:5000",
      OS_APPLICATION_CREDENTIAL_ID: "abc",
      OS_APPLICATION_CREDENTIAL_SECRET: "s3",
    })!;
    expect(tokenRequest(credential)).to.deep.equal({
      auth: {
        identity: {
          methods: ["application_credential"],
          application_credential: { id: "abc", secret: "s3" },
        },
      },
    });
    expect(tokensUrl(credential.authUrl)).to.equal("http://keystone.internal:5000/v3/auth/tokens?nocatalog");
    expect(tokensUrl(`${AUTH_URL}/`)).to.equal(`${AUTH_URL}/auth/tokens?nocatalog`);
    expect(
      keystoneCredentialsFromEnv({
        OS_AUTH_URL: AUTH_URL,
        OS_AUTH_TYPE: "v3applicationcredential",
        OS_APPLICATION_CREDENTIAL_NAME: "bridge",
        OS_APPLICATION_CREDENTIAL_SECRET: "s3",
        OS_USER_ID: "u1",
      }),
    ).to.deep.include({ credential: { name: "bridge", user: { id: "u1" } } });
  });

  it("refuses incomplete or contradictory settings, naming what is missing", () => {
    const refused = (env: NodeJS.ProcessEnv, words: RegExp) =>
      expect(() => ironicAuthFromEnv(env))
        .to.throw(ConfigError)
        .with.property("message")
        .that.matches(words);
    refused({ ...PASSWORD_ENV, OS_PASSWORD: undefined }, /OS_PASSWORD/);
    refused({ ...PASSWORD_ENV, OS_PROJECT_NAME: undefined }, /OS_PROJECT_NAME .*scoped tokens/);
    refused({ ...PASSWORD_ENV, OS_USER_DOMAIN_NAME: undefined }, /OS_USER_DOMAIN_NAME/);
    refused({ ...PASSWORD_ENV, OS_SYSTEM_SCOPE: "all" }, /one scope/);
    refused({ ...PASSWORD_ENV, OS_AUTH_TYPE: "token" }, /OS_AUTH_TYPE token/);
    refused({ ...PASSWORD_ENV, OS_AUTH_URL: "keystone:5000" }, /http\(s\) URL/);
    refused({ OS_AUTH_URL: AUTH_URL, OS_APPLICATION_CREDENTIAL_ID: "abc" }, /_SECRET/);
    refused({ ...PASSWORD_ENV, SHARDBRIDGE_IRONIC_TOKEN: "t" }, /unset one/);
  });

  it("without OS_AUTH_URL: the fixed token, or none", async () => {
    const fixed = ironicAuthFromEnv({ SHARDBRIDGE_IRONIC_TOKEN: "t0" });
    expect(await fixed.headers()).to.deep.equal({ "x-auth-token": "t0" });
    expect(fixed.refused({ "x-auth-token": "t0" }), "a fixed token is not tried again").to.equal(false);
    expect(await ironicAuthFromEnv({}).headers()).to.deep.equal({});
    expect(ironicAuthFromEnv(PASSWORD_ENV)).to.be.instanceOf(KeystoneAuth);
  });
});

/**
 * The same auth against the test cloud's keystone 30 and the Ironic 39 that validates its
 * tokens: the cloud's service user `shardbridge`, by an application credential (as
 * `cloud.bridgeEnv` gives it) or its password; and a keystone of this suite's own whose
 * tokens live 6 s, to see renewal come before Keystone's own expiry.
 */
describe("the bridge's Keystone auth for Ironic, against real keystone 30 and Ironic 39", function () {
  this.timeout(300_000);
  let cloud: OpenStackCloud;

  before(async () => {
    cloud = await sharedCloud();
  });

  it("an application credential from the OS_* environment: one token for many calls, the bridge's own user", async () => {
    const auth = ironicAuthFromEnv(cloud.bridgeEnv) as KeystoneAuth;
    const client = new IronicClient(cloud.ironic, auth);
    await Promise.all([1, 2, 3, 4, 5].map(() => client.nodes()));
    expect(auth.issued, "tokens asked of keystone for five calls at once").to.equal(1);
    expect(await cloud.keystone.whose(await auth.token())).to.deep.equal({
      user: "shardbridge",
      project: "service",
    });
    // Ironic takes no call without a token.
    const error = await new IronicClient(cloud.ironic, staticAuth()).nodes().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(IronicError).with.property("status", 401);
  });

  it("a password on project service, renewed by the clock: the held token until its time, then a new one Ironic takes", async () => {
    let now = 0;
    const auth = new KeystoneAuth(cloud.keystone.credentials("shardbridge"), { clock: () => now });
    const client = new IronicClient(cloud.ironic, auth);
    await client.nodes();
    const first = await auth.token();
    // keystone's 1 h token, asked for at 0: renewed at 55 minutes.
    now = 3_600_000 - RENEW_BEFORE_MS - 1;
    expect(await auth.token()).to.equal(first);
    now += 1;
    await client.nodes();
    const second = await auth.token();
    expect(second).not.to.equal(first);
    expect(auth.issued).to.equal(2);
    expect(await cloud.keystone.whose(second)).to.deep.equal({ user: "shardbridge", project: "service" });
  });

  it("a token Ironic refuses (revoked in keystone) is dropped, and the call made once more with a new one", async () => {
    const proxy = await RecordingProxy.start(cloud.ironic);
    try {
      const auth = new KeystoneAuth(cloud.keystone.credentials("shardbridge"));
      const revoked = await auth.token();
      await cloud.keystone.revoke(revoked);
      await new IronicClient(proxy.url, auth).nodes();
      const fresh = await auth.token();
      expect(
        proxy.requests.map((r) => [
          r.status,
          r.token === revoked ? "revoked" : r.token === fresh ? "fresh" : r.token,
        ]),
        "what Ironic was sent and answered",
      ).to.deep.equal([
        [401, "revoked"],
        [200, "fresh"],
      ]);
      // Refused again: no third try, Ironic's 401 is the caller's.
      await cloud.keystone.revoke(fresh);
      const again = new KeystoneAuth(cloud.keystone.credentials("shardbridge"));
      await again.token();
      const client = new IronicClient(proxy.url, {
        describe: "revoked every time",
        headers: async () => {
          const token = await again.token();
          await cloud.keystone.revoke(token);
          return { "x-auth-token": token };
        },
        refused: (sent) => again.refused(sent),
      });
      proxy.requests.length = 0;
      const error = await client.nodes().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(IronicError).with.property("status", 401);
      expect(proxy.requests.map((r) => r.status)).to.deep.equal([401, 401]);
    } finally {
      await proxy.stop();
    }
  });

  it("wrong credentials: keystone's 401, and nothing sent to Ironic", async () => {
    const proxy = await RecordingProxy.start(cloud.ironic);
    try {
      const auth = new KeystoneAuth({ ...cloud.keystone.credentials("shardbridge"), password: "not-it" });
      const error = await new IronicClient(proxy.url, auth).nodes().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(KeystoneError).with.property("status", 401);
      expect(proxy.requests).to.deep.equal([]);
    } finally {
      await proxy.stop();
    }
  });

  it("tokens that live 6 s (a keystone of its own): each renewed before keystone's expires_at, every one in use valid", async () => {
    const run = `sbt_${process.pid}_${randomBytes(3).toString("hex")}`;
    const dir = mkdtempSync(join(tmpdir(), "sb-keystone-"));
    const databases = new TestDatabases(run);
    const keystone = new Keystone({ dir, port: await freePort(), databases, tokenExpirationS: 6 });
    try {
      await keystone.start();
      const auth = new KeystoneAuth(keystone.credentials("admin", "system"));
      const used = new Map<string, { first: number; last: number }>();
      const until = Date.now() + 10_000;
      while (Date.now() < until) {
        const token = await auth.token();
        const at = Date.now();
        expect(
          await keystone.whose(token),
          `the token in use ${at - (used.get(token)?.first ?? at)} ms`,
        ).not.to.equal(null);
        used.set(token, { first: used.get(token)?.first ?? at, last: at });
        await new Promise((r) => setTimeout(r, 200));
      }
      const spans = [...used.values()].map((u) => u.last - u.first);
      console.log(
        `      6 s tokens over 10 s: ${auth.issued} issued, each used for ${spans.map((ms) => (ms / 1000).toFixed(1)).join(", ")} s`,
      );
      // Renewed half-way through a 6 s life: 3-4 tokens in 10 s, none used 6 s or longer.
      expect(auth.issued).to.be.within(3, 5);
      for (const span of spans) expect(span).to.be.below(6000);
    } finally {
      await keystone.service?.stop();
      databases.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
