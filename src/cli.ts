#!/usr/bin/env node
import type { Server } from "node:http";
import { parseArgs } from "node:util";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { createApp } from "./api/app.js";
import { bridgeServer } from "./api/server.js";
import { readJsonConfig } from "./config.js";
import { TokenAuthority, devTokens, parseTokens, readTokensFile } from "./api/auth.js";
import { z } from "zod";
import { BridgeClient } from "./agent/client.js";
import { runReferenceAgent } from "./agent/reference-agent.js";
import { IronicClient } from "./ironic/client.js";
import { IronicOutbox } from "./ironic/outbox.js";
import { toBridgeNodes } from "./ironic/sync.js";
import { InspectorClient } from "./ironic/inspector-client.js";
import { InspectionWatcher, inspectorDataSource, ironicInventorySource } from "./inspection/watcher.js";
import { WebhookClient } from "./inspection/webhook-client.js";
import { RING_USAGE, ringCommand } from "./commands/ring.js";
import { COMPARE_USAGE, compareCommand } from "./commands/compare.js";
import { MIGRATE_USAGE, migrateCommand } from "./commands/migrate.js";
import { SIMULATE_USAGE, simulateCommand } from "./commands/simulate.js";
import { CHAOS_USAGE, chaosCommand } from "./commands/chaos.js";
import { AGENT_FLAGS, agentToken, integerFlag } from "./commands/io.js";
import { RUN_USAGE, runCommand } from "./commands/run.js";
import { RingKindName } from "./domain/ring.js";
import { AgentId, ShardName } from "./domain/names.js";
import { parseOrThrow } from "./domain/validation.js";
import { TraitRulesFile } from "./traits/inspection.js";
import { DEFAULT_OWNERSHIP, OwnershipFile, OwnershipRegistry } from "./traits/ownership.js";
import { logger } from "./log.js";
import { loadShardCatalog } from "./shards/definitions.js";
import { openStore } from "./store/open.js";

const USAGE = `usage: shardbridge <command> [options]

commands:
  serve    run the bridge
             --port N        listen port (env SHARDBRIDGE_PORT, default 6390)
             --bind ADDR     listen address (env SHARDBRIDGE_BIND, default 127.0.0.1)
             --store SPEC    "memory" (default) or redis://host:port/db (env SHARDBRIDGE_STORE)
             --shards DIR    shard definitions, one NAME.json each (env SHARDBRIDGE_SHARDS, default ./shards)
             --tokens FILE   API bearer tokens {"tokens":[{"role","token","agent"?}]} (env SHARDBRIDGE_TOKENS_FILE,
                             or the JSON itself in SHARDBRIDGE_TOKENS)
             --dev-tokens FILE
                             development: use FILE, creating it with fresh random tokens (admin, inspector,
                             agents compute-0 and compute-1) when missing, and print them
             --inspector-secret S   the webhook's HMAC secret (env SHARDBRIDGE_INSPECTOR_SECRET)
             --trait-rules FILE     inspection -> trait rules (see examples/trait-rules.json)
             --ownership FILE       who owns which traits (default: compute owns COMPUTE_*, OWNER_*)
             --ring KIND            the legacy ring for unsharded nodes: tooz (nova's, default) or ketama
             --ring-rebuild S       seconds one legacy ring membership is used (default 60, like nova)
             --service-down-time S  an agent silent this long leaves the legacy ring (default 60, like nova)
             --ironic URL           apply every trait change to this Ironic API too (env SHARDBRIDGE_IRONIC_URL;
                                    an auth token from SHARDBRIDGE_IRONIC_TOKEN, noauth otherwise), and serve the
                                    fenced endpoint /fenced/SHARD/lease-TOKEN/ironic/... in front of it (callers' own
                                    credentials only: SHARDBRIDGE_IRONIC_TOKEN is never added there)
  ironic-sync  load nodes and their shard keys from Ironic into the bridge
             --ironic URL    Ironic's API (env SHARDBRIDGE_IRONIC_URL)
             --bridge URL    the bridge (default http://127.0.0.1:6390)
             --token T       an admin token (env SHARDBRIDGE_TOKEN)
  inspection-watch  deliver inspections an unmodified inspector finished to the bridge's webhook
             --ironic URL    Ironic's API, polled for inspection_finished_at (env SHARDBRIDGE_IRONIC_URL)
             --inspector URL read the data from ironic-inspector's /v1/introspection/{n}/data instead of
                             Ironic's /v1/nodes/{n}/inventory (env SHARDBRIDGE_INSPECTOR_URL)
             --bridge URL    the bridge (default http://127.0.0.1:6390)
             --token T       an inspector-role token (env SHARDBRIDGE_TOKEN)
             --secret S      the webhook's HMAC secret (env SHARDBRIDGE_INSPECTOR_SECRET)
             --interval S    seconds between polls (default 30)
             --state FILE    remember handled inspections across restarts (without it a restart re-reads
                             each node's last inspection once; the bridge applies each only once)
             --once          poll once, print what happened as JSON, exit 1 if anything failed
${RING_USAGE}${COMPARE_USAGE}${MIGRATE_USAGE}${SIMULATE_USAGE}${CHAOS_USAGE}${RUN_USAGE}  agent    run the reference compute agent for one shard
             --id HOST       this agent's id (nova-compute's host)
             --shard NAME    the shard to serve
             --bridge URL    the bridge (default http://127.0.0.1:6390)
             --token T       this agent's bearer token (env SHARDBRIDGE_TOKEN), or
             --tokens-file F take it from a tokens file (the agent entry for --id)
`;

async function serve(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string", default: process.env.SHARDBRIDGE_PORT ?? "6390" },
      bind: { type: "string", default: process.env.SHARDBRIDGE_BIND ?? "127.0.0.1" },
      store: { type: "string", default: process.env.SHARDBRIDGE_STORE ?? "memory" },
      shards: { type: "string", default: process.env.SHARDBRIDGE_SHARDS ?? "shards" },
      tokens: { type: "string", default: process.env.SHARDBRIDGE_TOKENS_FILE },
      "dev-tokens": { type: "string" },
      "inspector-secret": { type: "string", default: process.env.SHARDBRIDGE_INSPECTOR_SECRET },
      "trait-rules": { type: "string" },
      ownership: { type: "string" },
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      ring: { type: "string", default: "tooz" },
      "ring-rebuild": { type: "string", default: "60" },
      "service-down-time": { type: "string", default: "60" },
    },
  });
  const legacy = {
    kind: parseOrThrow(z.strictObject({ ring: RingKindName }), { ring: values.ring }).ring,
    rebuildMs: integerFlag("ring-rebuild", values["ring-rebuild"], 0, 86_400)! * 1000,
    serviceDownMs: integerFlag("service-down-time", values["service-down-time"], 1, 86_400)! * 1000,
  };
  const ironic =
    values.ironic === undefined
      ? undefined
      : new IronicOutbox(new IronicClient(values.ironic, process.env.SHARDBRIDGE_IRONIC_TOKEN));
  const inspector = {
    rules:
      values["trait-rules"] === undefined ? [] : readJsonConfig(values["trait-rules"], TraitRulesFile).rules,
    ownership: new OwnershipRegistry(
      values.ownership === undefined ? DEFAULT_OWNERSHIP : readJsonConfig(values.ownership, OwnershipFile),
    ),
    secret: values["inspector-secret"],
  };
  const authority = loadAuthority(values.tokens, values["dev-tokens"]);
  // Read the shard definitions before anything else: a bad file stops the start, naming it.
  const catalog = loadShardCatalog(values.shards!);
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port: not a port number: ${values.port}`);
  const store = await openStore(values.store!);
  if (store.kind === "memory") {
    logger.warn(
      "store is memory: lease state lives in this process only and is lost when it exits; " +
        "leases on shards are granted from one TTL after start (a lease held before a restart may still be in use); " +
        "use --store redis://… for more than one bridge",
    );
  }
  const app = createApp(store, {
    authority,
    catalog,
    inspector,
    legacy,
    ...(ironic && { ironic }),
    ...(values.ironic !== undefined && { ironicUrl: values.ironic }),
  });
  const server: Server = bridgeServer(app);
  server.once("error", (error: Error) => {
    // A port in use or an address we cannot bind: say so and fail, never "listening".
    process.stderr.write(`shardbridge: cannot listen on ${values.bind}:${port}: ${error.message}\n`);
    process.exit(1);
  });
  server.listen(port, values.bind!, () => {
    const address = server.address();
    const where =
      typeof address === "object" && address ? `http://${values.bind}:${address.port}` : String(address);
    logger.info("listening", { url: where, store: store.kind, shards_defined: catalog.definitions.length });
    const tokens =
      values["dev-tokens"] !== undefined ? `--tokens-file ${values["dev-tokens"]}` : "--token AGENT_TOKEN";
    process.stderr.write(
      `shardbridge listening on ${where} (store: ${store.kind}, ${catalog.definitions.length} shard definitions)\n` +
        `  connect an agent:  node dist/cli.js agent --id compute-0 --shard demo --bridge ${where} ${tokens}\n` +
        `  list shards:       curl -s -H "Authorization: Bearer ADMIN_TOKEN" ${where}/v1/shards\n`,
    );
  });
  const shutdown = (signal: string) => {
    logger.info("shutting down", { signal });
    // Stop accepting, let requests in flight finish, drop idle keep-alive connections
    // (agents reconnect to whichever bridge answers), then close the store.
    server.close(() => void store.close().then(() => process.exit(0)));
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
}

/** Where the API tokens come from: a file, the environment, or a development file. */
function loadAuthority(tokensFile: string | undefined, devFile: string | undefined): TokenAuthority {
  if (devFile !== undefined) {
    if (!existsSync(devFile)) {
      mkdirSync(dirname(devFile), { recursive: true });
      writeFileSync(devFile, `${JSON.stringify(devTokens(["compute-0", "compute-1"]), null, 2)}\n`, {
        mode: 0o600,
      });
    }
    const file = readTokensFile(devFile);
    process.stderr.write(`development API tokens (from ${devFile}; keep them to this machine):\n`);
    for (const entry of file.tokens) {
      const who = entry.role === "agent" ? `agent ${entry.agent}` : entry.role;
      process.stderr.write(`  ${who.padEnd(20)} ${entry.token}\n`);
    }
    return new TokenAuthority(file);
  }
  if (tokensFile !== undefined) return TokenAuthority.fromFile(tokensFile);
  const inline = process.env.SHARDBRIDGE_TOKENS;
  if (inline !== undefined) return new TokenAuthority(parseTokens(inline, "SHARDBRIDGE_TOKENS"));
  throw new Error(
    "no API tokens: pass --tokens FILE, set SHARDBRIDGE_TOKENS_FILE or SHARDBRIDGE_TOKENS, " +
      "or --dev-tokens FILE for a development bridge",
  );
}

async function agent(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: AGENT_FLAGS });
  const { id, shard } = parseOrThrow(z.strictObject({ id: AgentId, shard: ShardName }), {
    id: values.id,
    shard: values.shard,
  });
  const running = runReferenceAgent({
    id,
    shard,
    bridge: values.bridge!,
    token: agentToken(id, values.token, values["tokens-file"]),
  });
  const stop = () => void running.stop().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

/** Load Ironic's nodes (uuid, name, shard, conductor group) into the bridge, 20,000 per request. */
async function ironicSync(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      bridge: { type: "string", default: process.env.SHARDBRIDGE_URL ?? "http://127.0.0.1:6390" },
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
    },
  });
  if (values.ironic === undefined)
    throw new Error("ironic-sync: pass --ironic URL or set SHARDBRIDGE_IRONIC_URL");
  if (values.token === undefined)
    throw new Error("ironic-sync: pass --token (an admin token) or set SHARDBRIDGE_TOKEN");
  const bridge = new BridgeClient(values.bridge!, values.token);
  // Ironic knows a node's instance but not its host: keep the host the bridge was told.
  const instanceHost = new Map((await bridge.allNodes()).map((n) => [n.uuid, n.instance_host]));
  const nodes = toBridgeNodes(
    await new IronicClient(values.ironic, process.env.SHARDBRIDGE_IRONIC_TOKEN).nodes(),
    instanceHost,
  );
  let created = 0;
  let updated = 0;
  for (let i = 0; i < nodes.length; i += 20_000) {
    const answer = await bridge.bulkUpsert(nodes.slice(i, i + 20_000));
    created += answer.created;
    updated += answer.updated;
  }
  process.stdout.write(`${JSON.stringify({ nodes: nodes.length, created, updated })}\n`);
}

async function inspectionWatch(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      inspector: { type: "string", default: process.env.SHARDBRIDGE_INSPECTOR_URL },
      bridge: { type: "string", default: process.env.SHARDBRIDGE_URL ?? "http://127.0.0.1:6390" },
      token: { type: "string", default: process.env.SHARDBRIDGE_TOKEN },
      secret: { type: "string", default: process.env.SHARDBRIDGE_INSPECTOR_SECRET },
      interval: { type: "string", default: "30" },
      state: { type: "string" },
      once: { type: "boolean", default: false },
    },
  });
  const missing = (flag: string, env: string) => new Error(`inspection-watch: pass --${flag} or set ${env}`);
  if (values.ironic === undefined) throw missing("ironic", "SHARDBRIDGE_IRONIC_URL");
  if (values.token === undefined) throw missing("token", "SHARDBRIDGE_TOKEN");
  if (values.secret === undefined) throw missing("secret", "SHARDBRIDGE_INSPECTOR_SECRET");
  const intervalS = Number(values.interval);
  if (!Number.isFinite(intervalS) || intervalS < 1 || intervalS > 3600)
    throw new Error(`--interval: must be 1..3600 seconds, got ${values.interval}`);
  const ironic = new IronicClient(values.ironic, process.env.SHARDBRIDGE_IRONIC_TOKEN);
  const webhook = new WebhookClient(values.bridge!, values.token, values.secret);
  const watcher = new InspectionWatcher({
    ironic,
    source:
      values.inspector === undefined
        ? ironicInventorySource(ironic)
        : inspectorDataSource(new InspectorClient(values.inspector, process.env.SHARDBRIDGE_IRONIC_TOKEN)),
    deliver: (payload, delivery) => webhook.deliver(payload, delivery),
    ...(values.state !== undefined && { stateFile: values.state }),
  });
  if (values.once) {
    const summary = await watcher.poll();
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    if (summary.failed > 0) process.exitCode = 1;
    return;
  }
  const stop = new AbortController();
  process.once("SIGTERM", () => stop.abort());
  process.once("SIGINT", () => stop.abort());
  logger.info("inspection-watch started", {
    ironic: values.ironic,
    bridge: values.bridge,
    interval_s: intervalS,
  });
  await watcher.run(intervalS * 1000, stop.signal);
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      return serve(rest);
    case "agent":
      return agent(rest);
    case "run":
      return runCommand(rest);
    case "ironic-sync":
      return ironicSync(rest);
    case "inspection-watch":
      return inspectionWatch(rest);
    case "ring":
      return ringCommand(rest);
    case "compare":
      return compareCommand(rest);
    case "migrate":
      return migrateCommand(rest);
    case "simulate":
      return simulateCommand(rest);
    case "chaos":
      return chaosCommand(rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return;
    default:
      process.stderr.write(`unknown command: ${command}\n${USAGE}`);
      process.exit(2);
  }
}

// Output piped into `head` and the like: a closed pipe ends the command quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`shardbridge: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
