import { expect } from "chai";
import { ConfigError } from "../src/config.js";
import {
  ironicAuthFromEnv,
  isFresh,
  KeystoneAuth,
  keystoneCredentialsFromEnv,
  renewAt,
  RENEW_BEFORE_MS,
  tokenRequest,
  tokensUrl,
} from "../src/ironic/keystone.js";

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
