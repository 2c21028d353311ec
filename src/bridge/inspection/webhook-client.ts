import { signedHeaders } from "../../contracts/webhook-signature.js";

/** What the bridge answered a delivery: status, parsed body, and whether it was a replayed answer. */
export interface DeliveryAnswer {
  status: number;
  body: unknown;
  replay: boolean;
}

/**
 * Sends signed deliveries to the bridge's inspector webhook, as an inspector with a
 * webhook would: bearer token of the inspector role, HMAC over timestamp and body.
 */
export class WebhookClient {
  constructor(
    private readonly bridgeUrl: string,
    private readonly token: string,
    private readonly secret: string,
    private readonly timeoutMs = 10_000,
    private readonly nowS = () => Date.now() / 1000,
  ) {}

  async deliver(payload: unknown, delivery?: string): Promise<DeliveryAnswer> {
    const body = JSON.stringify(payload);
    const res = await fetch(new URL("/v1/inspector/webhook", this.bridgeUrl), {
      method: "POST",
      headers: {
        authorization: `Bearer ${this.token}`,
        "content-type": "application/json",
        ...signedHeaders(this.secret, body, this.nowS(), delivery),
      },
      body,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text === "" ? null : JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, body: parsed, replay: res.headers.get("x-shardbridge-replay") === "true" };
  }
}
