// The decode worker run from source (tsx: development and the tests). A worker thread
// does not inherit the parent's `--import tsx`, so it registers tsx itself, then loads
// the TypeScript worker. The build runs dist/api/decode/worker.js directly.
import { register } from "tsx/esm/api";

register();
await import("./worker.ts");
