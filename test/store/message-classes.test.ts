import { expect } from "chai";
import { createServer, IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { memoryUnderTest, useApp } from "../helpers/backends.js";
import { TEST_TOKENS, call, testAuthority } from "../helpers/http.js";

/**
 * express 5 sets its app's prototypes on every request and response it takes; each such
 * change gives the object a hidden class of its own in V8, and every property access on it
 * then misses its cache (see src/api/http/message-classes.ts). The bridge's server builds its
 * messages on those prototypes already, so express's call changes nothing.
 */
describe("requests and responses keep the prototypes they are built with", () => {
  const backend = memoryUnderTest();
  const makeApp = (store: Parameters<typeof bridgeApp>[0]) =>
    bridgeApp(store, { authority: testAuthority(), catalog: new ShardCatalog() });
  const ctx = useApp(backend, makeApp);

  /** Run `work` with Object.setPrototypeOf watched: the HTTP messages it was asked to give a new prototype. */
  async function prototypeChanges(work: () => Promise<void>): Promise<{ asked: number; changed: string[] }> {
    const original = Object.setPrototypeOf;
    const seen = { asked: 0, changed: [] as string[] };
    Object.setPrototypeOf = (target: object, proto: object | null) => {
      if (target instanceof IncomingMessage || target instanceof ServerResponse) {
        seen.asked += 1;
        if (Object.getPrototypeOf(target) !== proto) seen.changed.push(target.constructor.name);
      }
      return original(target, proto);
    };
    try {
      await work();
    } finally {
      Object.setPrototypeOf = original;
    }
    return seen;
  }

  it("express finds every request and response on its prototypes already and changes none", async () => {
    const seen = await prototypeChanges(async () => {
      expect((await call(`${ctx.base}/healthz`, "GET", undefined, null)).status).to.equal(200);
      expect((await call(`${ctx.base}/v1/shards`, "GET")).status).to.equal(200);
      expect((await call(`${ctx.base}/v1/nope`, "GET")).status).to.equal(404);
      expect((await call(`${ctx.base}/v1/shards`, "GET", undefined, null)).status).to.equal(401);
    });
    // Express did ask (two calls a request): the watch sees its calls.
    expect(seen.asked).to.equal(8);
    expect(seen.changed).to.deep.equal([]);
  });

  it("still serves on a plain node:http server, where express sets the prototypes itself", async () => {
    const app = makeApp(ctx.store);
    const server = createServer(app).listen(0, "127.0.0.1");
    await new Promise((resolve) => server.once("listening", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const seen = await prototypeChanges(async () => {
        const health = await call(`${url}/healthz`, "GET", undefined, null);
        expect(health.status).to.equal(200);
        expect(health.body.status).to.equal("ok");
        const shards = await call(`${url}/v1/shards`, "GET", undefined, TEST_TOKENS.viewer);
        expect(shards.status).to.equal(200);
        expect(shards.body.shards).to.deep.equal([]);
      });
      expect(seen.changed).to.have.length(4);
    } finally {
      await new Promise((resolve) => server.close(resolve));
      app.close();
    }
  });
});
