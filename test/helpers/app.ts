import { createApp, type AppOptions, type BridgeApp } from "../../src/api/app.js";
import { bridgeServices, type BridgeServiceOptions } from "../../src/cli/bridge-services.js";
import type { Store } from "../../src/store/store.js";

/** The bridge's API over `store` as `serve` builds it: the services, then the app that mounts them. */
export function bridgeApp(store: Store, options: AppOptions & BridgeServiceOptions): BridgeApp {
  return createApp(bridgeServices(store, options), options);
}
