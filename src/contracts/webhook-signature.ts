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
 * HMAC-SHA256 over "<timestamp>\n<delivery id>\n<raw body>" (the id empty when the
 * delivery has none), hex: what the sender puts in X-Shardbridge-Signature as
 * "sha256=<hex>". Every header that changes what a delivery means is signed: a replay
 * under another delivery id does not match. Neither a timestamp (digits) nor a delivery id
 * (DeliveryId's characters) can hold a newline, so the string splits one way only. The
 * body may be given as the chunks it was read in (never joined for this). The hook in
 * ironic-hook/ (signing.py) signs the same string.
 */
export function webhookSignature(
  secret: string,
  timestamp: string,
  delivery: string | undefined,
  body: Buffer | string | readonly Buffer[],
): string {
  const hmac = createHmac("sha256", secret).update(`${timestamp}\n${delivery ?? ""}\n`);
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
    [SIGNATURE_HEADERS.signature]: `sha256=${webhookSignature(secret, timestamp, delivery, body)}`,
    ...(delivery !== undefined && { [SIGNATURE_HEADERS.delivery]: delivery }),
  };
}
