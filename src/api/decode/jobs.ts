import type { TraitRule } from "../../bridge/inspection/trait-rules.js";
import { decodeBulk, type PackedNodes } from "./bulk.js";
import { decodeHeartbeat, type HeartbeatRequestBody } from "./heartbeat.js";
import type { Decoded } from "./result.js";
import { decodeWebhook, type WebhookRequest } from "./webhook.js";

/**
 * What a body is decoded as, and the one decoder for each: the pool runs it on the event
 * loop for a small body and the worker for a large one (see pool.ts).
 */
export type DecodeJob = { kind: "bulk" } | { kind: "webhook"; nowS: number } | { kind: "heartbeat" };
export type ResultOf<J extends DecodeJob> = J extends { kind: "bulk" }
  ? PackedNodes
  : J extends { kind: "webhook" }
    ? WebhookRequest
    : HeartbeatRequestBody;

/** Decode `text` as `job` says. */
export function decodeText(job: DecodeJob, text: string, rules: TraitRule[]): Decoded<unknown> {
  switch (job.kind) {
    case "bulk":
      return decodeBulk(text);
    case "webhook":
      return decodeWebhook(text, rules, job.nowS);
    case "heartbeat":
      return decodeHeartbeat(text);
  }
}
