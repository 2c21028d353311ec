import type { AddressInfo } from "node:net";
import type { BridgeApp } from "../../src/api/app.js";
import { TokenAuthority } from "../../src/api/http/auth.js";
import { bridgeServer } from "../../src/api/http/server.js";
import { signedHeaders } from "../../src/contracts/webhook-signature.js";
import { checkedText } from "./openapi.js";

/** Serve `app` on a free loopback port for a test; `close` stops it. */
export async function listen(app: BridgeApp): Promise<{ url: string; close: () => Promise<void> }> {
  const server = bridgeServer(app).listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        app.close(); // status pages left open would hold the close
      }),
  };
}

/**
 * A JSON request; answers the status and the parsed body (or null). Sends the admin
 * test token unless `token` says otherwise (null: no Authorization header). Every answer
 * is checked against the OpenAPI document (helpers/openapi.ts): a status the operation
 * does not document, or a body its schema refuses, fails the test that received it.
 */
export async function call(
  url: string,
  method: string,
  body?: unknown,
  token: string | null = TEST_TOKENS.admin,
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const init: RequestInit = { method, headers };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(url, init);
  const text = await checkedText(method, url, res);
  return { status: res.status, body: text === "" ? null : JSON.parse(text) };
}

/** Fixed bearer tokens for tests: one per role, and agent tokens for a few agent ids. */
export const TEST_TOKENS = {
  admin: "admin-token-0123456789",
  inspector: "inspector-token-0123456789",
  viewer: "viewer-token-0123456789",
  agent: (agent: string) => `agent-token-${agent}-0123456789`,
};
export const TEST_AGENTS = ["compute-0", "compute-1", "compute-a", "compute-b", "compute-9"];

export function testAuthority(): TokenAuthority {
  return new TokenAuthority({
    tokens: [
      { role: "admin", token: TEST_TOKENS.admin },
      { role: "inspector", token: TEST_TOKENS.inspector },
      { role: "viewer", token: TEST_TOKENS.viewer },
      ...TEST_AGENTS.map((agent) => ({ role: "agent" as const, agent, token: TEST_TOKENS.agent(agent) })),
    ],
  });
}

export const TEST_WEBHOOK_SECRET = "webhook-secret-for-tests";

/** POST a payload to the inspector webhook, signed as the inspector would sign it. */
export async function postWebhook(
  base: string,
  payload: unknown,
  options: { delivery?: string; ts?: number; secret?: string; token?: string; raw?: string } = {},
): Promise<{ status: number; body: any; replay: boolean }> {
  const body = options.raw ?? JSON.stringify(payload);
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.token ?? TEST_TOKENS.inspector}`,
    "content-type": "application/json",
    ...signedHeaders(
      options.secret ?? TEST_WEBHOOK_SECRET,
      body,
      options.ts ?? Date.now() / 1000,
      options.delivery,
    ),
  };
  const res = await fetch(`${base}/v1/inspector/webhook`, { method: "POST", headers, body });
  return {
    status: res.status,
    body: JSON.parse(await checkedText("POST", `${base}/v1/inspector/webhook`, res)),
    replay: res.headers.get("x-shardbridge-replay") === "true",
  };
}

/** The test fleet's node `n` (1, 2, ...): a valid uuid4 that sorts as `n` does. */
export const uuid = (n: number): string => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

/** `count` nodes of the test fleet (uuid(1) on, named node-0 on), every third in `shard`, the rest unsharded. */
export const everyThirdIn = (shard: string, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    uuid: uuid(i + 1),
    name: `node-${i}`,
    shard: i % 3 === 0 ? shard : null,
    conductor_group: "",
    instance_host: null,
  }));

/** A whole node as PUT and bulk take it: every field given, those not named here empty. */
export function wholeNode<T extends object>(fields: T) {
  return { name: null, shard: null, conductor_group: "", instance_host: null, ...fields };
}

/** A node's traits as the bridge at `base` holds them (`GET /v1/nodes/{node}/traits`), each with its owner. */
export async function bridgeTraits(
  base: string,
  node: string,
  token: string = TEST_TOKENS.admin,
): Promise<Array<{ name: string; owner: string }>> {
  const { body } = await call(`${base}/v1/nodes/${node}/traits`, "GET", undefined, token);
  return (body as { traits: Array<{ name: string; owner: string }> }).traits;
}

/** Their names, sorted. */
export const bridgeTraitNames = async (base: string, node: string, token?: string): Promise<string[]> =>
  (await bridgeTraits(base, node, token)).map((t) => t.name).sort();
