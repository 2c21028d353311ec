import { IncomingMessage, ServerResponse } from "node:http";
import type { Express } from "express";

/** The classes a node:http server builds each request and response from (its createServer options). */
export interface MessageClasses {
  IncomingMessage: typeof IncomingMessage;
  ServerResponse: typeof ServerResponse;
}

/**
 * The request and response classes to serve `app` with, so that express never changes a
 * live object's prototype.
 *
 * express 5 gives each request and response its app's prototypes as it takes them
 * (`Object.setPrototypeOf(req, app.request)` in app.handle). V8 gives an object whose
 * prototype changes a map (hidden class) of its own, so every request and response then
 * has a map no code has seen before, and every property read or write on them, in Node's
 * http code and in express alike, misses its inline cache and is looked up again in the
 * runtime: ~100 cache misses a request (`node --log-ic`), against none on a bare node:http
 * server. Measured on this 2-core VM with wrk: a bare node:http server that only sets the
 * two prototypes per request answered 12-15k/s against 22-40k/s without, and the bridge's
 * `GET /healthz` cost 150-230 µs of CPU an answer.
 *
 * Here the app's two prototypes become the prototypes of two subclasses, with the same
 * methods and getters copied onto them, and the server constructs its messages from those
 * subclasses: express's setPrototypeOf finds the prototype already in place and changes
 * nothing, and the objects keep the maps their constructors gave them. A server built
 * without them (any plain `http.createServer(app)`) still works: express sets the same
 * prototypes, at the old cost. Call once per app, before it serves.
 */
export function stableMessageClasses(app: Express): MessageClasses {
  class BridgeRequest extends IncomingMessage {}
  class BridgeResponse extends ServerResponse {}
  adoptChain(BridgeRequest.prototype, app.request, IncomingMessage.prototype);
  adoptChain(BridgeResponse.prototype, app.response, ServerResponse.prototype);
  app.request = BridgeRequest.prototype as Express["request"];
  app.response = BridgeResponse.prototype as unknown as Express["response"];
  return { IncomingMessage: BridgeRequest, ServerResponse: BridgeResponse as typeof ServerResponse };
}

/**
 * Copy onto `target` every own property of `from` and of its prototypes down to `base`
 * (not included), the nearer ones last so that they win as they do in the chain: what
 * express put between Node's class and the app (its request or response methods, the
 * app's `app`).
 */
function adoptChain(target: object, from: object, base: object): void {
  const layers: object[] = [];
  let layer: object | null = from;
  for (; layer !== null && layer !== base; layer = Object.getPrototypeOf(layer) as object | null)
    layers.push(layer);
  if (layer !== base) throw new Error("express's prototype does not extend Node's class");
  for (const own of layers.reverse()) Object.defineProperties(target, Object.getOwnPropertyDescriptors(own));
}
