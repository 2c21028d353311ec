/**
 * The one call the bridge makes to a standalone ironic-inspector: the processed data of
 * a node's last introspection (`store_data` must be enabled there).
 */
export class InspectorClient {
  constructor(
    private readonly endpoint: string,
    private readonly authToken?: string,
    private readonly timeoutMs = 10_000,
  ) {}

  /** The introspection data (inventory plus what the processing hooks added), or null when none is stored. */
  async introspectionData(node: string): Promise<Record<string, unknown> | null> {
    const res = await fetch(new URL(`/v1/introspection/${node}/data`, this.endpoint), {
      headers: {
        accept: "application/json",
        ...(this.authToken !== undefined && { "x-auth-token": this.authToken }),
      },
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    if (res.status === 404) return null;
    if (res.status !== 200) throw new Error(`ironic-inspector answered ${res.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as Record<string, unknown>;
  }
}
