import { parseArgs } from "node:util";
import { BRIDGE_FLAG, BRIDGE_USAGE, IRONIC_AUTH_USAGE, httpUrlFlag, integerFlag, tokenFlag } from "./io.js";
import { IronicClient } from "../upstream/ironic-client.js";
import { InspectorClient } from "../upstream/inspector-client.js";
import { ironicAuthFromEnv } from "../upstream/keystone.js";
import {
  InspectionWatcher,
  inspectorDataSource,
  ironicInventorySource,
} from "../bridge/inspection/watcher.js";
import { WebhookClient } from "../bridge/inspection/webhook-client.js";
import { logger } from "../runtime/log.js";
import { ConfigError } from "../runtime/config.js";
import { onStopSignal } from "./signals.js";

/** `shardbridge inspection-watch`: finished inspections to the webhook, for an inspector that cannot call it. */
export const INSPECTION_WATCH_USAGE = `  inspection-watch  deliver inspections an unmodified inspector finished to the bridge's webhook
             --ironic URL    Ironic's API, polled for the nodes whose inspection_finished_at is recent
                             (env SHARDBRIDGE_IRONIC_URL); the fallback where Ironic sends no notifications
             --inspector URL read the data from ironic-inspector's /v1/introspection/{n}/data instead of
                             Ironic's /v1/nodes/{n}/inventory (env SHARDBRIDGE_INSPECTOR_URL)
${BRIDGE_USAGE}             --token T       an inspector-role token (env SHARDBRIDGE_TOKEN)
             --secret S      the webhook's HMAC secret (env SHARDBRIDGE_INSPECTOR_SECRET)
             --interval S    seconds between polls (default 30)
             --lookback S    each poll reads back to S seconds before the newest inspection it has seen
                             (default 120: conductors' clocks apart, a commit late); older ones are
                             never read again unless one failed and waits to be tried again
             --state FILE    remember handled inspections and the window across restarts (without it
                             a restart's first poll reads each node's last inspection once; the
                             bridge applies each only once)
             --once          poll once, print what happened as JSON, exit 1 if anything failed
${IRONIC_AUTH_USAGE}`;

export async function inspectionWatchCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      inspector: { type: "string", default: process.env.SHARDBRIDGE_INSPECTOR_URL },
      bridge: BRIDGE_FLAG,
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
      secret: { type: "string", default: process.env.SHARDBRIDGE_INSPECTOR_SECRET },
      interval: { type: "string", default: "30" },
      lookback: { type: "string", default: "120" },
      state: { type: "string" },
      once: { type: "boolean", default: false },
    },
  });
  const missing = (flag: string, env: string) =>
    new ConfigError(`inspection-watch: pass --${flag} or set ${env}`);
  if (values.ironic === undefined) throw missing("ironic", "SHARDBRIDGE_IRONIC_URL");
  if (values.token === undefined) throw missing("token", "SHARDBRIDGE_TOKEN");
  if (values.secret === undefined) throw missing("secret", "SHARDBRIDGE_INSPECTOR_SECRET");
  httpUrlFlag("ironic", values.ironic, "SHARDBRIDGE_IRONIC_URL");
  httpUrlFlag("inspector", values.inspector, "SHARDBRIDGE_INSPECTOR_URL");
  httpUrlFlag("bridge", values.bridge, "SHARDBRIDGE_URL");
  const intervalS = integerFlag("interval", values.interval, 1, 3600)!;
  const lookbackS = integerFlag("lookback", values.lookback, 0, 86_400)!;
  // One Keystone token (or fixed token) for Ironic and the inspector alike.
  const ironicAuth = ironicAuthFromEnv();
  const ironic = new IronicClient(values.ironic, ironicAuth);
  const webhook = new WebhookClient(values.bridge, tokenFlag(values.token), values.secret);
  const watcher = new InspectionWatcher({
    ironic,
    source:
      values.inspector === undefined
        ? ironicInventorySource(ironic)
        : inspectorDataSource(new InspectorClient(values.inspector, ironicAuth)),
    deliver: (payload, delivery) => webhook.deliver(payload, delivery),
    lookbackMs: lookbackS * 1000,
    ...(values.state !== undefined && { stateFile: values.state }),
  });
  if (values.once) {
    const summary = await watcher.poll();
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    if (summary.failed > 0) process.exitCode = 1;
    return;
  }
  const stop = new AbortController();
  onStopSignal("inspection-watch", () => stop.abort());
  logger.info("inspection-watch started", {
    ironic: values.ironic,
    bridge: values.bridge,
    interval_s: intervalS,
  });
  await watcher.run(intervalS * 1000, stop.signal);
}
