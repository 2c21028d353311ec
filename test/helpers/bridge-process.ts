import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devTokens, type TokensFile } from "../../src/runtime/tokens-file.js";
import { AgentProcess } from "./agent-process.js";
import { TEST_WEBHOOK_SECRET } from "./http.js";
import { freePort } from "./redis-server.js";

/** A real `shardbridge serve` in a child process, with its own shards and tokens files. */
export interface BridgeProcess {
  url: string;
  dir: string;
  tokensFile: string;
  tokens: TokensFile;
  readonly serve: AgentProcess;
  /** kill -9 the bridge and start it again on the same port, files and store */
  restart(): Promise<void>;
  tokenOf(agent: string): string;
  /** the token of the one admin, inspector or viewer the tokens file holds */
  tokenFor(role: "admin" | "inspector" | "viewer"): string;
  stop(): Promise<void>;
}

/** Poll /healthz until the bridge answers (its logs may be silenced). */
async function untilHealthy(url: string, serve: AgentProcess): Promise<void> {
  // Generous: a cold tsx start of the CLI on a loaded 2-core machine took over 15 s.
  const deadline = performance.now() + 45_000;
  for (;;) {
    if (serve.child.exitCode !== null) throw new Error(`serve exited with ${serve.child.exitCode}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline) throw new Error("serve did not become healthy within 45 s");
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startBridge(options: {
  shards: Array<{ name: string; lease_ttl_ms: number; agents?: string[] }>;
  agents: string[];
  store?: string;
  env?: NodeJS.ProcessEnv;
  /** more `serve` flags */
  args?: string[];
  /** flags for node itself, before the script (e.g. V8's --log-ic) */
  nodeFlags?: string[];
  /** the tokens file's content (default: fresh dev tokens for `agents`), e.g. another bridge's */
  tokens?: TokensFile;
}): Promise<BridgeProcess> {
  const dir = mkdtempSync(join(tmpdir(), "sb-bridge-"));
  mkdirSync(join(dir, "shards"));
  for (const shard of options.shards)
    writeFileSync(join(dir, "shards", `${shard.name}.json`), JSON.stringify(shard));
  const tokens = options.tokens ?? devTokens(options.agents);
  const tokensFile = join(dir, "tokens.json");
  // As an operator keeps it: readable by its owner only (else the bridge warns).
  writeFileSync(tokensFile, JSON.stringify(tokens), { mode: 0o600 });
  const port = await freePort();
  // The inspection webhook is open with the tests' shared secret.
  const env = { SHARDBRIDGE_INSPECTOR_SECRET: TEST_WEBHOOK_SECRET, ...options.env };
  const start = () =>
    AgentProcess.cli(
      "serve",
      [
        ...["serve", "--port", String(port), "--store", options.store ?? "memory"],
        ...["--shards", join(dir, "shards"), "--tokens", tokensFile],
        ...(options.args ?? []),
      ],
      env,
      options.nodeFlags,
    );
  let serve = start();
  try {
    await untilHealthy(`http://127.0.0.1:${port}`, serve);
  } catch (error) {
    // Not handed to the caller, so nobody else would stop it.
    await serve.kill();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    dir,
    tokensFile,
    tokens,
    get serve() {
      return serve;
    },
    restart: async () => {
      await serve.kill();
      serve = start();
      await untilHealthy(`http://127.0.0.1:${port}`, serve);
    },
    tokenOf: (agent) => tokens.tokens.find((t) => t.role === "agent" && t.agent === agent)!.token,
    tokenFor: (role) => tokens.tokens.find((t) => t.role === role)!.token,
    stop: async () => {
      await serve.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `shardbridge agent` (the reference agent) as `id` for `shard` on `bridge`, with its tokens file. */
export function referenceAgent(id: string, shard: string, bridge: BridgeProcess): AgentProcess {
  return AgentProcess.cli(id, [
    ...["agent", "--id", id, "--shard", shard],
    ...["--bridge", bridge.url, "--tokens-file", bridge.tokensFile],
  ]);
}
