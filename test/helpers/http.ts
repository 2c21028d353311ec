import type { AddressInfo } from "node:net";
import type { Express } from "express";

/** Serve `app` on a free loopback port for a test; `close` stops it. */
export async function listen(app: Express): Promise<{ url: string; close: () => Promise<void> }> {
  const server = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A JSON request; answers the status and the parsed body (or null). */
export async function call(
  url: string,
  method: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const init: RequestInit = { method, headers: { "content-type": "application/json" } };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : JSON.parse(text) };
}
