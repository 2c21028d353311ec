import { staticAuth, type IronicAuth } from "./keystone.js";

/**
 * The one call the bridge makes to a standalone ironic-inspector: the processed data of
 * a node's last introspection (`store_data` must be enabled there).
 */
export class InspectorClient {
  constructor(
    private readonly endpoint: string,
    private readonly auth: IronicAuth = staticAuth(),
    private readonly timeoutMs = 10_000,
  ) {}

  /** The introspection data (inventory plus what the processing hooks added), or null when none is stored. */
  async introspectionData(node: string): Promise<Record<string, unknown> | null> {
    const get = async () => {
      const signal = AbortSignal.timeout(this.timeoutMs);
      const auth = await this.auth.headers(signal);
      const res = await fetch(new URL(`/v1/introspection/${node}/data`, this.endpoint), {
        headers: { accept: "application/json", ...auth },
        signal,
      });
      return { auth, res, text: await res.text() };
    };
    const first = await get();
    let { res, text } = first;
    if (res.status === 401 && this.auth.refused(first.auth)) ({ res, text } = await get());
    if (res.status === 404) return null;
    if (res.status !== 200) throw new Error(`ironic-inspector answered ${res.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as Record<string, unknown>;
  }
}
