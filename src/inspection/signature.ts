import { createHmac } from "node:crypto";

/**
 * Signed requests older or newer than this are refused as possible replays; an
 * inspection's finish time may not be further ahead than this either.
 */
export const SIGNATURE_WINDOW_S = 300;

/** Header names of a signed webhook delivery. */
export const SIGNATURE_HEADERS = {
  timestamp: "x-shardbridge-timestamp",
  signature: "x-shardbridge-signature",
  delivery: "x-shardbridge-delivery",
} as const;

/**
 * HMAC-SHA256 over "<timestamp>.<raw body>", hex: what the sender puts in
 * X-Shardbridge-Signature as "sha256=<hex>". The body may be given as the chunks it was
 * read in (never joined for this).
 */
export function webhookSignature(
  secret: string,
  timestamp: string,
  body: Buffer | string | readonly Buffer[],
): string {
  const hmac = createHmac("sha256", secret).update(`${timestamp}.`);
  for (const part of Array.isArray(body) ? body : [body]) hmac.update(part);
  return hmac.digest("hex");
}

/** The headers that sign `body` at `nowS` (seconds since the epoch), with an optional delivery id. */
export function signedHeaders(
  secret: string,
  body: string,
  nowS: number,
  delivery?: string,
): Record<string, string> {
  const timestamp = String(Math.floor(nowS));
  return {
    [SIGNATURE_HEADERS.timestamp]: timestamp,
    [SIGNATURE_HEADERS.signature]: `sha256=${webhookSignature(secret, timestamp, body)}`,
    ...(delivery !== undefined && { [SIGNATURE_HEADERS.delivery]: delivery }),
  };
}
