import { parseArgs } from "node:util";
import { logger } from "../runtime/log.js";
import { z } from "zod";
import { BridgeClient, BridgeError } from "../agent/bridge-client.js";
import { AgentId, ShardName, hostNameProblem, novaHostFor } from "../core/names.js";
import { maxGraceMs, runSupervised } from "../agent/run/supervisor.js";
import { ConfigError } from "../runtime/config.js";
import { KeystoneAuth, keystoneCredentialsFromEnv } from "../upstream/keystone.js";
import { ComputeApi } from "../upstream/nova-compute-api.js";
import {
  AGENT_FLAGS,
  BRIDGE_USAGE,
  STANDBY_POLL_USAGE,
  agentToken,
  flagsOrThrow,
  httpUrlFlag,
  integerFlag,
  standbyPollMs,
} from "./io.js";
import { onStopSignal } from "./signals.js";

export const RUN_USAGE = `  run -- COMMAND [ARGS...]  run COMMAND (nova-compute) only while this host holds the shard's lease
             --id HOST       this physical host's agent id at the bridge
             --shard NAME    the shard to serve
${BRIDGE_USAGE}             --token T       this agent's bearer token (env SHARDBRIDGE_TOKEN), or
             --tokens-file F take it from a tokens file (the agent entry for --id)
             --host NAME     nova's [DEFAULT]host for the child, the same on every host (default SHARD-ironic)
             --grace MS      TERM-to-KILL time when the lease is lost (default and maximum: TTL/3 - 250 ms)
             --stop-grace MS TERM-to-KILL time when run itself is stopped (SIGTERM, SIGHUP) while it holds the
                             lease, which it keeps renewing meanwhile so that COMMAND finishes what it has begun
                             (default 60000, nova's graceful_shutdown_timeout; cut to --grace if the lease is lost)
             --restart       run COMMAND again when it exits while the lease is held (default: release and exit)
             --unfenced      start COMMAND even when the bridge fronts no Ironic (serve without --ironic): its
                             Ironic calls then go straight to Ironic, unchecked against the lease (logged)
             --resend-preempted  after each start of COMMAND, send once more every reboot nova accepted for the
                             host's servers that nova-compute's own start-up cancelled (logged); needs --nova-api
                             and an admin's Keystone credentials in the standard OS_* variables (kept from the child)
             --nova-api URL  the compute API's endpoint (env SHARDBRIDGE_NOVA_API), e.g. http://nova.internal:8774/v2.1
             --egress-fence  have the kernel reject every packet COMMAND's processes send once the lease may have
                             moved on (nftables on the child's cgroup v2, its deadline restated at every renew), so
                             a frozen or cut-off host's COMMAND sends nothing to RabbitMQ, nova or Ironic after its
                             successor may start; needs nft, CAP_NET_ADMIN and a cgroup of the child's own, or the
                             child is not started (exit 2)
${STANDBY_POLL_USAGE}                  The child gets SHARDBRIDGE_SHARD, SHARDBRIDGE_TOKEN, SHARDBRIDGE_AGENT, OS_DEFAULT__HOST,
                  OS_IRONIC__SHARD and, when the bridge fronts an Ironic, OS_IRONIC__ENDPOINT_OVERRIDE (its
                  fenced endpoint under the child's token). It heartbeats declaring the shard every 10 s,
                  standing by or active. Bad input exits 2 before anything starts; a bridge not up yet is
                  waited for.
`;

async function prepare(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...AGENT_FLAGS,
      host: { type: "string" },
      grace: { type: "string" },
      "stop-grace": { type: "string" },
      restart: { type: "boolean", default: false },
      unfenced: { type: "boolean", default: false },
      "resend-preempted": { type: "boolean", default: false },
      "nova-api": { type: "string", default: process.env.SHARDBRIDGE_NOVA_API },
      "egress-fence": { type: "boolean", default: false },
    },
  });
  if (positionals.length === 0) throw new ConfigError("run: give the command to run after --");
  const { id, shard, host } = flagsOrThrow(
    z.strictObject({ id: AgentId, shard: ShardName, host: AgentId.optional() }),
    { id: values.id, shard: values.shard, host: values.host },
  );
  const bridge = httpUrlFlag("bridge", values.bridge, "SHARDBRIDGE_URL");
  // nova refuses a [DEFAULT] host that is no host name, and would never start: said now.
  const serviceHost = host ?? novaHostFor(shard);
  const hostProblem = host === undefined ? hostNameProblem(serviceHost) : null;
  if (hostProblem !== null)
    throw new ConfigError(
      `run: nova's [DEFAULT] host for shard ${shard} would be ${JSON.stringify(serviceHost)}, which ${hostProblem}: give --host`,
    );
  const graceMs = integerFlag("grace", values.grace, 0, 600_000);
  const stopGraceMs = integerFlag("stop-grace", values["stop-grace"], 0, 3_600_000);
  const computeApi = values["resend-preempted"] ? resendApi(values["nova-api"]) : undefined;
  const pollMs = standbyPollMs(values["standby-poll"]);
  const token = agentToken(id, values.token, values["tokens-file"]);
  const client = new BridgeClient(bridge, token);
  const info = await untilAnswered(bridge, () => client.shard(shard));
  if (info === null)
    throw new ConfigError(
      `run: the bridge knows no shard ${shard} (not defined, no nodes, no lease history)`,
    );
  if (info.agents !== null && !info.agents.includes(id))
    throw new ConfigError(
      `run: agent ${id} may not serve shard ${shard} (allowed: ${info.agents.join(", ")})`,
    );
  const most = maxGraceMs(info.lease_ttl_ms);
  if (graceMs !== undefined && graceMs > most)
    throw new ConfigError(
      `run: --grace ${graceMs} ms is more than the lease leaves (${most} ms: TTL ${info.lease_ttl_ms} ms, ` +
        "the child must be gone before a standby can be granted the lease)",
    );
  // A nova-compute given no fenced endpoint calls Ironic with its own credentials, and a
  // frozen old host's calls would land beside its successor's: never by accident.
  if (info.ironic_endpoint === null && !values.unfenced)
    throw new ConfigError(
      `run: the bridge at ${bridge} fronts no Ironic (serve --ironic), so ${positionals[0]} would call Ironic ` +
        "unfenced: start the bridge with --ironic, or give --unfenced to run it so",
    );
  return {
    id,
    shard,
    bridge,
    token,
    serviceHost,
    graceMs,
    ...(stopGraceMs !== undefined && { stopGraceMs }),
    restart: values.restart,
    command: positionals,
    ...(computeApi !== undefined && { computeApi }),
    ...(values["egress-fence"] === true && { egressFence: true }),
    ...(pollMs !== undefined && { standbyPollMs: pollMs }),
    ...(info.ironic_endpoint !== null && {
      ironicEndpoint: (leaseToken: number, fenceKey: string) =>
        new URL(
          info.ironic_endpoint!.replace("{token}", String(leaseToken)).replace("{fence_key}", fenceKey),
          bridge,
        ).href,
    }),
  };
}

/** The compute API `--resend-preempted` calls, as the admin the OS_* variables name. */
function resendApi(endpoint: string | undefined): ComputeApi {
  if (endpoint === undefined)
    throw new ConfigError(
      "run: --resend-preempted needs --nova-api URL (or SHARDBRIDGE_NOVA_API): the compute API",
    );
  const url = httpUrlFlag("nova-api", endpoint, "SHARDBRIDGE_NOVA_API");
  const credentials = keystoneCredentialsFromEnv(process.env);
  if (credentials === null)
    throw new ConfigError(
      "run: --resend-preempted needs Keystone credentials of an admin in the OS_* variables (OS_AUTH_URL and the rest)",
    );
  return new ComputeApi(url, new KeystoneAuth(credentials));
}

/**
 * The bridge's answer, waiting for a bridge that is not up yet (booted with this host,
 * or restarting): an unreachable bridge is not bad input, and the supervisor holds no
 * lease meanwhile, so nothing runs. Answers from the bridge, refusals included, return.
 */
async function untilAnswered<T>(bridge: string, ask: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ask();
    } catch (error) {
      // fetch rejects with a TypeError when it reaches nobody; a bridge that answers 503
      // has lost its store for a moment (Redis restarting). Any other answer is final.
      const transient = error instanceof TypeError || (error instanceof BridgeError && error.status === 503);
      if (!transient) throw error;
      if (attempt === 1 || attempt % 10 === 0)
        logger.warn("bridge-unreachable", { bridge, error: String(error.cause ?? error), attempt });
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * attempt)));
    }
  }
}

/** Bad input (exit 2, see src/cli.ts) is refused in `prepare`, before anything starts. */
export async function runCommand(argv: string[]): Promise<void> {
  const options = await prepare(argv);
  const running = runSupervised(options);
  onStopSignal("run", running.stop);
  process.exit(await running.done);
}
