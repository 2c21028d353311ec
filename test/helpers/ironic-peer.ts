import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./redis-server.js";

/** The real Ironic API from ../shared/peers (installed from Debian on first use). */
const PEERS = fileURLToPath(new URL("../../../shared/peers/", import.meta.url));

export function ironicPeersAvailable(): boolean {
  return existsSync(join(PEERS, "ironic-up.sh"));
}

export interface IronicPeer {
  endpoint: string;
  /** ironic-inspector's endpoint, when started with `inspector: true` */
  inspectorEndpoint?: string;
  /** SIGSTOP the Ironic process: calls to it hang (the kernel still queues connections) */
  freeze(): void;
  /** SIGCONT it */
  thaw(): void;
  /**
   * Set (or, with null, clear) the node's `reservation` in Ironic's own database: what a
   * conductor holding the node's lock writes, so Ironic answers 409 "locked by host" to
   * changes until it is cleared.
   */
  reserve(node: string, host: string | null): void;
  /** Ironic's own record of the trait calls it answered, in the order it answered them */
  traitCalls(): TraitCall[];
  stop(): void;
}

/** One trait call in Ironic's access log. */
export interface TraitCall {
  method: "PUT" | "DELETE";
  node: string;
  trait: string;
  status: number;
}

/** `127.0.0.1 "PUT /v1/nodes/UUID/traits/TRAIT HTTP/1.1" status: 204`, as eventlet.wsgi logs it. */
const TRAIT_CALL =
  /"(PUT|DELETE) \/v1\/nodes\/([0-9a-f-]{36})\/traits\/([A-Z0-9_]+) HTTP\/1\.1" status: (\d+)/;

/**
 * Start a private Ironic (API + conductor, sqlite, noauth, fake-hardware) on free ports,
 * and with `inspector` a standalone ironic-inspector beside it.
 */
export async function startIronic(options: { inspector?: boolean } = {}): Promise<IronicPeer> {
  const state = mkdtempSync(join(tmpdir(), "sb-ironic-"));
  const env = {
    ...process.env,
    IRONIC_PORT: String(await freePort()),
    INSPECTOR_PORT: String(await freePort()),
  };
  const up = spawnSync("bash", [join(PEERS, "ironic-up.sh"), state], {
    env,
    encoding: "utf8",
    timeout: 300_000,
  });
  if (up.status !== 0) throw new Error(`ironic-up.sh failed (${up.status}): ${up.stderr.slice(-2000)}`);
  const stop = () => {
    spawnSync("bash", [join(PEERS, "ironic-down.sh"), state], { encoding: "utf8", timeout: 60_000 });
    rmSync(state, { recursive: true, force: true });
  };
  let inspectorEndpoint: string | undefined;
  if (options.inspector === true) {
    const inspector = spawnSync("bash", [join(PEERS, "inspector-up.sh"), state], {
      env,
      encoding: "utf8",
      timeout: 300_000,
    });
    if (inspector.status !== 0) {
      stop();
      throw new Error(`inspector-up.sh failed (${inspector.status}): ${inspector.stderr.slice(-2000)}`);
    }
    inspectorEndpoint = inspector.stdout.trim().split("\n").pop()!;
  }
  const pid = () => Number(readFileSync(join(state, "ironic.pid"), "utf8").trim());
  return {
    endpoint: up.stdout.trim().split("\n").pop()!,
    ...(inspectorEndpoint !== undefined && { inspectorEndpoint }),
    freeze: () => process.kill(pid(), "SIGSTOP"),
    thaw: () => process.kill(pid(), "SIGCONT"),
    reserve: (node, host) => {
      // Debian's python (Ironic needs it anyway) has sqlite3; the CLI may not be installed.
      const script =
        "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], timeout=30); " +
        "db.execute('UPDATE nodes SET reservation = ? WHERE uuid = ?', (sys.argv[3] or None, sys.argv[2])); " +
        "db.commit()";
      const run = spawnSync(
        "/usr/bin/python3",
        ["-c", script, join(state, "ironic.sqlite"), node, host ?? ""],
        {
          encoding: "utf8",
        },
      );
      if (run.status !== 0) throw new Error(`reserving ${node} in Ironic's database: ${run.stderr}`);
    },
    traitCalls: () =>
      readFileSync(join(state, "ironic.log"), "utf8")
        .split("\n")
        .flatMap((line) => {
          const m = TRAIT_CALL.exec(line);
          return m === null
            ? []
            : [{ method: m[1] as "PUT" | "DELETE", node: m[2]!, trait: m[3]!, status: Number(m[4]) }];
        }),
    stop: () => {
      // A frozen Ironic would not stop on SIGTERM.
      try {
        process.kill(pid(), "SIGCONT");
      } catch {
        // gone already
      }
      stop();
    },
  };
}

/** Create a fake-hardware node in Ironic (API 1.82), answering its uuid. */
export async function createIronicNode(
  endpoint: string,
  fields: { name: string; uuid?: string; shard?: string; inspect_interface?: string },
): Promise<string> {
  const res = await fetch(`${endpoint}/v1/nodes`, {
    method: "POST",
    headers: { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" },
    body: JSON.stringify({ driver: "fake-hardware", ...fields }),
  });
  if (res.status !== 201) throw new Error(`creating node ${fields.name}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { uuid: string }).uuid;
}

const IRONIC_HEADERS = { "x-openstack-ironic-api-version": "1.82", "content-type": "application/json" };

async function ironicCall(endpoint: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${endpoint}${path}`, {
    method,
    headers: IRONIC_HEADERS,
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text === "" ? null : JSON.parse(text);
}

/** Wait until the node reaches `state`, failing on a *failed state or after `timeoutMs`. */
async function untilProvisionState(endpoint: string, node: string, state: string, timeoutMs = 60_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const now = await ironicCall(endpoint, "GET", `/v1/nodes/${node}?fields=provision_state,last_error`);
    if (now.provision_state === state) return;
    if (/failed$/.test(now.provision_state))
      throw new Error(`node ${node}: ${now.provision_state}: ${now.last_error}`);
    if (performance.now() > deadline)
      throw new Error(`node ${node} still ${now.provision_state}, not ${state}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The port MAC the inspector looks a node up by, and the enrolled node moved to `manageable`. */
export async function enrollForInspection(endpoint: string, node: string, mac: string): Promise<void> {
  await ironicCall(endpoint, "POST", "/v1/ports", { node_uuid: node, address: mac });
  await ironicCall(endpoint, "PUT", `/v1/nodes/${node}/states/provision`, { target: "manage" });
  await untilProvisionState(endpoint, node, "manageable");
}

/**
 * One inspection as the real ramdisk would run it: `inspect`, then the inventory posted to
 * ironic-inspector's /v1/continue, until Ironic has the node back in `manageable`.
 * Answers the node's inspection_finished_at.
 */
export async function inspectWithInventory(
  peer: IronicPeer,
  node: string,
  inventory: unknown,
): Promise<string> {
  await startInspection(peer.endpoint, node);
  await continueInspection(peer.inspectorEndpoint!, inventory);
  await untilProvisionState(peer.endpoint, node, "manageable");
  const after = await ironicCall(peer.endpoint, "GET", `/v1/nodes/${node}?fields=inspection_finished_at`);
  return after.inspection_finished_at as string;
}

/**
 * `inspect` until the node waits for its ramdisk. Ironic polls the inspector every 2 s; a
 * poll that lands before the inspector has registered a re-inspection reads the previous,
 * finished one, and Ironic ends the new inspection at once (back to `manageable`, with the
 * old data). Seen under load in a clean-clone run; then inspect again.
 */
async function startInspection(endpoint: string, node: string): Promise<void> {
  const fields = "provision_state,last_error,inspection_finished_at";
  for (let attempt = 1; ; attempt++) {
    const before = await ironicCall(endpoint, "GET", `/v1/nodes/${node}?fields=${fields}`);
    await ironicCall(endpoint, "PUT", `/v1/nodes/${node}/states/provision`, { target: "inspect" });
    const deadline = performance.now() + 30_000;
    for (;;) {
      const now = await ironicCall(endpoint, "GET", `/v1/nodes/${node}?fields=${fields}`);
      if (now.provision_state === "inspect wait") return;
      if (/failed$/.test(now.provision_state))
        throw new Error(`node ${node}: ${now.provision_state}: ${now.last_error}`);
      // Back in manageable with a new finish time: that inspection is over already.
      if (
        now.provision_state === "manageable" &&
        now.inspection_finished_at !== before.inspection_finished_at
      ) {
        if (attempt === 3)
          throw new Error(`node ${node}: inspection ended before its ramdisk reported, 3 times`);
        await new Promise((r) => setTimeout(r, 3000)); // let the inspector's status settle
        break;
      }
      if (performance.now() > deadline)
        throw new Error(`node ${node} still ${now.provision_state}, not inspect wait`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * POST the ramdisk's data to the inspector's /v1/continue. The inspector registers a node
 * for lookup in the background after Ironic asked it to introspect, so "Could not find a
 * node" can come first; the real ramdisk retries its lookup too.
 */
async function continueInspection(inspectorEndpoint: string, inventory: unknown): Promise<void> {
  const deadline = performance.now() + 20_000;
  for (;;) {
    const res = await fetch(`${inspectorEndpoint}/v1/continue`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(inventory),
    });
    if (res.status === 200) return;
    const text = await res.text();
    if (!(res.status === 400 && /Could not find a node/.test(text)) || performance.now() > deadline)
      throw new Error(`inspector /v1/continue: ${res.status} ${text}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** ../shared/peers/fake-inventory.json: what the fake ramdisk reports. */
export function peerInventory(): any {
  return JSON.parse(readFileSync(join(PEERS, "fake-inventory.json"), "utf8"));
}

/**
 * A private Ironic (and with `inspector`, ironic-inspector) for one describe block: started
 * before its tests, stopped after; the block is skipped, saying why, without ../shared/peers.
 */
export function useIronicPeer(
  what: string,
  options: { inspector?: boolean } = {},
): { readonly peer: IronicPeer } {
  let peer: IronicPeer | undefined;
  before(async function () {
    this.timeout(400_000);
    if (!ironicPeersAvailable()) {
      console.log(`      (../shared/peers not found: ${what} skipped)`);
      this.skip();
    }
    peer = await startIronic(options);
  });
  after(() => peer?.stop());
  return {
    get peer() {
      return peer!;
    },
  };
}
