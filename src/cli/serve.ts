import type { Server } from "node:http";
import { parseArgs } from "node:util";
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createApp } from "../api/app.js";
import { FENCED_LIMITS } from "../api/routes/fenced-ironic.js";
import { bridgeServices } from "./bridge-services.js";
import { bridgeServer } from "../api/http/server.js";
import { ConfigError, readJsonConfig } from "../runtime/config.js";
import { TokenAuthority } from "../api/http/auth.js";
import { devTokens, parseTokens, readTokensFile } from "../runtime/tokens-file.js";
import { z } from "zod";
import { IronicClient } from "../upstream/ironic-client.js";
import { DEFAULT_OWNER_TTL_MS, IronicQueueDelivery } from "../bridge/ironic/delivery.js";
import { workerIdentity } from "../bridge/ironic/worker-identity.js";
import { resyncAfterLoss, storeSyncTarget, syncNodes } from "../bridge/ironic/sync.js";
import { ironicAuthFromEnv } from "../upstream/keystone.js";
import { NotificationListener } from "../bridge/inspection/notification-listener.js";
import { ironicInventorySource } from "../bridge/inspection/watcher.js";
import { IRONIC_QUEUE_MAX_ENTRIES } from "../store/ports/ironic-queue.js";
import { IRONIC_AUTH_USAGE, httpUrlFlag, integerFlag, flagsOrThrow } from "./io.js";
import { RingKindName } from "../core/ring/kinds.js";
import { TraitRulesFile } from "../bridge/inspection/trait-rules.js";
import { DEFAULT_OWNERSHIP, OwnershipFile, OwnershipRegistry } from "../core/traits/ownership.js";
import { logger } from "../runtime/log.js";
import { loadShardCatalog } from "../bridge/shards/catalog.js";
import type { ShardDefinitionFile } from "../contracts/shards.js";
import { DefinitionsBackup } from "../bridge/shards/definitions-backup.js";
import { describeSpec } from "../store/redis/connect.js";
import { openStore } from "../store/open.js";
import { onStopSignal } from "./signals.js";

/** How many connections may wait to be accepted (see listen below). */
const LISTEN_BACKLOG = 8192;
/** `shardbridge serve`: the bridge itself. */
export const SERVE_USAGE = `  serve    run the bridge
             --port N        listen port (env SHARDBRIDGE_PORT, default 6390)
             --bind ADDR     listen address (env SHARDBRIDGE_BIND, default 127.0.0.1)
             --store SPEC    "memory" (default), redis://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]
                             or redis+cluster://HOST:PORT[,HOST:PORT...] (env SHARDBRIDGE_STORE); passwords
                             from SHARDBRIDGE_REDIS_PASSWORD and SHARDBRIDGE_SENTINEL_PASSWORD, never the spec
             --shards DIR    shard definitions, one NAME.json each (env SHARDBRIDGE_SHARDS, default ./shards)
             --definitions-backup FILE
                             keep the shard definitions written through the API in FILE too (written whole,
                             atomically, after every change), so that a store that comes back empty gets them
                             back from the bridge (env SHARDBRIDGE_DEFINITIONS_BACKUP; default under systemd's
                             StateDirectory: $STATE_DIRECTORY/shard-definitions.json; elsewhere none)
             --allow-undefined-shards
                             grant leases on any valid shard name; by default only on a shard that a definition
                             names or a node carries (others: 404 shardbridge.shard.undefined)
             --tokens FILE   API bearer tokens {"tokens":[{"role","token","agent"?}]} (env SHARDBRIDGE_TOKENS_FILE,
                             or the JSON itself in SHARDBRIDGE_TOKENS)
             --dev-tokens FILE
                             development: use FILE, creating it with fresh random tokens (admin, inspector,
                             viewer, agents compute-0 and compute-1) when missing, and print them
             --inspector-secret S   the webhook's HMAC secret (env SHARDBRIDGE_INSPECTOR_SECRET)
             --trait-rules FILE     inspection -> trait rules (see examples/trait-rules.json)
             --ownership FILE       who owns which traits (default: compute owns COMPUTE_*, OWNER_*)
             --ring KIND            the legacy ring for unsharded nodes: tooz (nova's, default) or ketama
             --ring-rebuild S       seconds one legacy ring membership is used (default 60, like nova)
             --service-down-time S  an agent silent this long leaves the legacy ring (default 60, like nova)
             --ironic URL           apply every trait change to this Ironic API too (env SHARDBRIDGE_IRONIC_URL;
                                    credentials below), and serve the fenced endpoint
                                    /fenced/SHARD/lease-TOKEN-KEY/ironic/... in front of it (callers' own credentials
                                    only: the bridge's are never added there, credentials in URL included). The
                                    changes wait in a queue in the
                                    store (on Redis it outlives the bridge; every bridge on the store needs the
                                    same --ironic)
             --fenced-concurrency N requests through the fenced endpoint at once, all shards (default 64; more: 503)
             --fenced-deadline S    the longest one request through the fenced endpoint takes, its answer
                                    included (default 60; a write's is also no longer than its lease has left)
             --ironic-owner-ttl S   seconds a bridge owns a part of that queue without renewing (default 6, the
                                    shard leases' default TTL): after a bridge dies, another takes its part over
                                    within about this long, and the same bridge restarted on the same --bind and
                                    --port at once; an Ironic call times out after a quarter of it
             --ironic-concurrency N Ironic calls in flight at once from this bridge, at most (default 8;
                                    fewer while calls go unanswered)
             --ironic-queue-max N   changes (one commit's for one node) the queue holds before it folds further
                                    changes per node and trait, last one winning (default 100000)
             --ironic-notifications URL
                                    read Ironic's notifications from this RabbitMQ (amqp://USER:PASS@HOST:5672/VHOST,
                                    env SHARDBRIDGE_IRONIC_NOTIFICATIONS; needs --ironic): each inspection Ironic
                                    finishes is read from Ironic (its inventory), run through the trait rules and
                                    applied as a webhook delivery would be. Ironic sends them once its
                                    [DEFAULT] notification_level is set (info)
             --ironic-notifications-exchange NAME   Ironic's control_exchange (default ironic)
             --ironic-notifications-topic NAME      Ironic's notification topic (default ironic_versioned_notifications)
             --ironic-notifications-queue NAME      the durable queue every bridge reads, each notification reaching
                                                    one of them (default shardbridge.ironic-inspections)
${IRONIC_AUTH_USAGE}`;

export async function serveCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string", default: process.env.SHARDBRIDGE_PORT ?? "6390" },
      bind: { type: "string", default: process.env.SHARDBRIDGE_BIND ?? "127.0.0.1" },
      store: { type: "string", default: process.env.SHARDBRIDGE_STORE ?? "memory" },
      shards: { type: "string", default: process.env.SHARDBRIDGE_SHARDS ?? "shards" },
      "definitions-backup": { type: "string", default: definitionsBackupDefault() },
      "allow-undefined-shards": { type: "boolean", default: false },
      tokens: { type: "string", default: process.env.SHARDBRIDGE_TOKENS_FILE },
      "dev-tokens": { type: "string" },
      "inspector-secret": { type: "string", default: process.env.SHARDBRIDGE_INSPECTOR_SECRET },
      "trait-rules": { type: "string" },
      ownership: { type: "string" },
      ironic: { type: "string", default: process.env.SHARDBRIDGE_IRONIC_URL },
      "ironic-owner-ttl": { type: "string", default: String(DEFAULT_OWNER_TTL_MS / 1000) },
      "fenced-concurrency": { type: "string", default: String(FENCED_LIMITS.concurrency) },
      "fenced-deadline": { type: "string", default: String(FENCED_LIMITS.deadlineMs / 1000) },
      "ironic-concurrency": { type: "string", default: "8" },
      "ironic-queue-max": { type: "string", default: String(IRONIC_QUEUE_MAX_ENTRIES) },
      "ironic-notifications": { type: "string", default: process.env.SHARDBRIDGE_IRONIC_NOTIFICATIONS },
      "ironic-notifications-exchange": { type: "string", default: "ironic" },
      "ironic-notifications-topic": { type: "string", default: "ironic_versioned_notifications" },
      "ironic-notifications-queue": { type: "string", default: "shardbridge.ironic-inspections" },
      ring: { type: "string", default: "tooz" },
      "ring-rebuild": { type: "string", default: "60" },
      "service-down-time": { type: "string", default: "60" },
    },
  });
  const legacy = {
    kind: flagsOrThrow(z.strictObject({ ring: RingKindName }), { ring: values.ring }).ring,
    rebuildMs: integerFlag("ring-rebuild", values["ring-rebuild"], 0, 86_400)! * 1000,
    serviceDownMs: integerFlag("service-down-time", values["service-down-time"], 1, 86_400)! * 1000,
  };
  const delivery = {
    ownerTtlMs: integerFlag("ironic-owner-ttl", values["ironic-owner-ttl"], 1, 3600)! * 1000,
    concurrency: integerFlag("ironic-concurrency", values["ironic-concurrency"], 1, 1000)!,
    queueMax: integerFlag("ironic-queue-max", values["ironic-queue-max"], 1, 100_000_000)!,
  };
  const fencedLimits = {
    concurrency: integerFlag("fenced-concurrency", values["fenced-concurrency"], 1, 100_000)!,
    deadlineMs: integerFlag("fenced-deadline", values["fenced-deadline"], 1, 3600)! * 1000,
  };
  const inspector = {
    rules:
      values["trait-rules"] === undefined ? [] : readJsonConfig(values["trait-rules"], TraitRulesFile).rules,
    ownership: new OwnershipRegistry(
      values.ownership === undefined ? DEFAULT_OWNERSHIP : readJsonConfig(values.ownership, OwnershipFile),
    ),
    secret: values["inspector-secret"],
  };
  httpUrlFlag("ironic", values.ironic, "SHARDBRIDGE_IRONIC_URL");
  const notifications = values["ironic-notifications"];
  if (notifications !== undefined) {
    if (!/^amqps?:\/\//.test(notifications))
      throw new ConfigError("serve: --ironic-notifications must be an amqp:// or amqps:// URL");
    if (values.ironic === undefined)
      throw new ConfigError(
        "serve: --ironic-notifications needs --ironic (inspection data is read from Ironic)",
      );
  }
  // Read the shard definitions before anything else, the development tokens file too: a
  // bad file stops the start, naming it, with nothing written.
  const catalog = loadShardCatalog(values.shards, values["allow-undefined-shards"]);
  const { authority, devAgents } = loadAuthority(values.tokens, values["dev-tokens"]);
  const port = integerFlag("port", values.port, 0, 65535)!;
  const store = await openStore(values.store, { ironicQueueMax: delivery.queueMax });
  if (store.kind === "memory") {
    logger.warn(
      "store is memory: lease state lives in this process only and is lost when it exits; " +
        "leases on shards are granted from one TTL after start (a lease held before a restart may still be in use); " +
        "use --store redis://… for more than one bridge",
    );
  }
  const volatility = await store.definitions.volatility();
  if (volatility !== null && store.kind === "redis")
    logger.warn(
      `store: ${volatility}: a restart of it loses every lease, node and shard definition; ` +
        "leases wait one TTL, nodes come back from Ironic (--ironic) or ironic-sync, shard definitions " +
        "from the bridges (see docs/OPERATIONS.md)",
    );
  const backupPath = values["definitions-backup"];
  const definitionsBackup =
    backupPath === undefined || backupPath === ""
      ? undefined
      : new DefinitionsBackup(backupPath, describeSpec(values.store));
  if (definitionsBackup === undefined && volatility !== null)
    logger.warn(
      "no --definitions-backup: shard definitions written through the API survive the store's loss only " +
        "while a running bridge still holds them",
    );
  // The bridge's own calls to Ironic (delivery, inventory reads) share one auth; the fenced
  // endpoint uses none of it.
  const ironicAuth = values.ironic === undefined ? undefined : ironicAuthFromEnv();
  if (ironicAuth !== undefined)
    logger.info("Ironic auth", { ironic: values.ironic, auth: ironicAuth.describe });
  const ironic =
    values.ironic === undefined
      ? undefined
      : new IronicQueueDelivery(store.traits.ironicQueue, store.ironicOwners, {
          endpoint: values.ironic,
          auth: ironicAuth,
          ownerTtlMs: delivery.ownerTtlMs,
          concurrency: delivery.concurrency,
          worker: workerIdentity(values.bind, port),
        });
  if (ironic !== undefined && !ironic.durable)
    logger.warn(
      "Ironic delivery: the queue of trait changes for Ironic is in this process's memory (store is memory): " +
        "changes not yet in Ironic when the bridge exits are lost; use --store redis://… to keep them in the store",
    );
  else if (ironic !== undefined)
    logger.info("Ironic delivery: queue in the store", {
      worker: ironic.worker,
      owner_ttl_s: delivery.ownerTtlMs / 1000,
    });
  const services = bridgeServices(store, {
    catalog,
    inspector,
    legacy,
    ...(ironic && { ironic }),
    ...(definitionsBackup && { definitionsBackup }),
  });
  // The definitions other bridges wrote to the store are in force before the first request
  // (and those of the backup file given back to a store that lost them).
  await services.definitions.refresh();
  await services.definitions.saveBackupAtStart();
  const traits = services.traits;
  const ironicClient = values.ironic === undefined ? undefined : new IronicClient(values.ironic, ironicAuth);
  // A store that lost its nodes gets them back from Ironic, shard keys and all.
  if (ironicClient !== undefined)
    resyncAfterLoss(services.nodesMark, () =>
      syncNodes(storeSyncTarget(store, services.definitions, traits), () => ironicClient.nodes()),
    );
  const listener =
    notifications === undefined || ironicClient === undefined
      ? undefined
      : new NotificationListener({
          url: notifications,
          exchange: values["ironic-notifications-exchange"],
          topic: values["ironic-notifications-topic"],
          queue: values["ironic-notifications-queue"],
          source: ironicInventorySource(ironicClient),
          rules: inspector.rules,
          traits,
        }).start();
  const app = createApp(services, {
    authority,
    ...(values.ironic !== undefined && { ironicUrl: values.ironic, fencedLimits }),
  });
  const server: Server = bridgeServer(app);
  server.once("error", (error: Error) => {
    // A port in use or an address we cannot bind: say so and fail, never "listening".
    process.stderr.write(`shardbridge: cannot listen on ${values.bind}:${port}: ${error.message}\n`);
    process.exit(1);
  });
  // Connections not yet accepted: node's default, 511, overflowed ~400,000 times over a few
  // runs of the scale bench, 20,000 agents (re)connecting at once, each dropped SYN retried
  // after 1, 3, 7, 15 s. The kernel caps it at net.core.somaxconn (docs/OPERATIONS.md).
  server.listen({ port, host: values.bind, backlog: LISTEN_BACKLOG }, () => {
    const address = server.address();
    const where =
      typeof address === "object" && address ? `http://${values.bind}:${address.port}` : String(address);
    logger.info("listening", { url: where, store: store.kind, shards_defined: catalog.definitions.length });
    // Only now: the worker's name is this address's, which no other live process holds.
    ironic?.start();
    const hint = hintedAgent(catalog.definitions, devAgents);
    const tokens = hint.tokenInDevFile ? `--tokens-file ${values["dev-tokens"]}` : "--token AGENT_TOKEN";
    process.stderr.write(
      `shardbridge listening on ${where} (store: ${store.kind}, ${catalog.definitions.length} shard definitions)\n` +
        `  connect an agent:  node dist/cli.js agent --id ${hint.agent} --shard ${hint.shard} --bridge ${where} ${tokens}\n` +
        (catalog.definitions.length === 0
          ? `                     (no shard defined: a lease needs shards/NAME.json, PUT /v1/shard-definitions/NAME or a node carrying NAME)\n`
          : "") +
        (inspector.secret !== undefined
          ? `  inspection:        POST ${where}/v1/inspector/webhook, signed with --inspector-secret's secret (make run's: .state/dev-inspector-secret)\n`
          : `  inspection:        webhook off (no --inspector-secret: it answers 503 shardbridge.inspector.not_configured)\n`) +
        `  list shards:       curl -s -H "Authorization: Bearer ADMIN_TOKEN" ${where}/v1/shards\n` +
        `  status page:       ${where}/ui (log in with a viewer or admin token)\n`,
    );
  });
  onStopSignal("serve", () => {
    // Stop accepting, let requests in flight finish, drop idle keep-alive connections
    // (agents reconnect to whichever bridge answers) and end the status pages' streams
    // (they reconnect the same way), then close the store. Ironic delivery hands its part
    // of the queue back first, so another bridge goes on at once.
    // The notifications not yet handled go back to the queue for another bridge.
    const delivered = Promise.all([listener?.stop(), ironic?.stop()]);
    server.close(() => void delivered.then(() => store.close()).then(() => process.exit(0)));
    app.close();
    server.closeIdleConnections();
    // Ironic calls in flight end within a quarter of the owner TTL before the hand-over.
    setTimeout(() => process.exit(0), 5000 + (ironic === undefined ? 0 : delivery.ownerTtlMs / 4)).unref();
  });
}

/**
 * The backup file of the store's shard definitions when none is named: in the state
 * directory systemd gives the unit (StateDirectory=, see examples/systemd), else none.
 */
function definitionsBackupDefault(): string | undefined {
  const fromEnv = process.env.SHARDBRIDGE_DEFINITIONS_BACKUP;
  if (fromEnv !== undefined) return fromEnv;
  const state = process.env.STATE_DIRECTORY?.split(":")[0];
  return state === undefined || state === "" ? undefined : join(state, "shard-definitions.json");
}

/**
 * The agent and shard the start-up hint names, so that the line works as printed: a defined
 * shard and an agent its definition allows, one the development tokens file holds a token
 * for (`devAgents`) where there is such a pair; else the first shard's first allowed agent.
 */
export function hintedAgent(
  definitions: readonly ShardDefinitionFile[],
  devAgents: readonly string[],
): { shard: string; agent: string; tokenInDevFile: boolean } {
  for (const { name, agents } of definitions) {
    const agent = devAgents.find((a) => agents === undefined || agents.includes(a));
    if (agent !== undefined) return { shard: name, agent, tokenInDevFile: true };
  }
  const first = definitions[0];
  const agent = first?.agents?.[0] ?? devAgents[0] ?? "compute-0";
  return { shard: first?.name ?? "SHARD", agent, tokenInDevFile: devAgents.includes(agent) };
}

/**
 * Where the API tokens come from: a file, the environment, or a development file (and the
 * agents that one holds tokens for, for the start-up hint).
 */
function loadAuthority(
  tokensFile: string | undefined,
  devFile: string | undefined,
): { authority: TokenAuthority; devAgents: string[] } {
  if (devFile !== undefined) {
    if (!existsSync(devFile)) {
      mkdirSync(dirname(devFile), { recursive: true });
      // Written beside it, then renamed: a full disk leaves no empty file that would make
      // every later start fail, only this start's error.
      const partial = `${devFile}.partial`;
      try {
        writeFileSync(partial, `${JSON.stringify(devTokens(["compute-0", "compute-1"]), null, 2)}\n`, {
          mode: 0o600,
        });
        renameSync(partial, devFile);
      } catch (error) {
        try {
          rmSync(partial, { force: true });
        } catch {
          // not ours to remove (a folder of that name): the error below says what failed
        }
        throw new ConfigError(`--dev-tokens: cannot write ${devFile}: ${(error as Error).message}`);
      }
    }
    const file = readTokensFile(devFile);
    process.stderr.write(`development API tokens (from ${devFile}; keep them to this machine):\n`);
    for (const entry of file.tokens) {
      const who = entry.role === "agent" ? `agent ${entry.agent}` : entry.role;
      process.stderr.write(`  ${who.padEnd(20)} ${entry.token}\n`);
    }
    const devAgents = file.tokens.flatMap((entry) => (entry.role === "agent" ? [entry.agent] : []));
    return { authority: new TokenAuthority(file), devAgents };
  }
  if (tokensFile !== undefined) return { authority: TokenAuthority.fromFile(tokensFile), devAgents: [] };
  const inline = process.env.SHARDBRIDGE_TOKENS;
  if (inline !== undefined)
    return { authority: new TokenAuthority(parseTokens(inline, "SHARDBRIDGE_TOKENS")), devAgents: [] };
  throw new ConfigError(
    "no API tokens: pass --tokens FILE, set SHARDBRIDGE_TOKENS_FILE or SHARDBRIDGE_TOKENS, " +
      "or --dev-tokens FILE for a development bridge",
  );
}
