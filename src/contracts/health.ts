import { z } from "zod";

/** Which store a bridge runs on. */
const StoreKind = z.enum(["memory", "redis"]);

/** Which build answers: what `shardbridge --version` prints. */
const Build = { version: z.string(), commit: z.string().nullable() };

/** GET /healthz: alive, and which build answers. */
export const Health = z.strictObject({ status: z.literal("ok"), ...Build });
export type Health = z.infer<typeof Health>;

/** GET /readyz: the store answered a ping. */
export const Ready = z.strictObject({ status: z.literal("ready"), store: StoreKind, ...Build });
export type Ready = z.infer<typeof Ready>;

/** GET /readyz: the store did not answer. */
export const NotReady = z.strictObject({
  status: z.literal("store unreachable"),
  store: StoreKind,
  error: z.string(),
  ...Build,
});
export type NotReady = z.infer<typeof NotReady>;
